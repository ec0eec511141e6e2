"""The hooked transformer and its config."""

from interp_rand.model.config import ModelConfig
from interp_rand.model.transformer import HookedTransformer

__all__ = ["HookedTransformer", "ModelConfig"]
