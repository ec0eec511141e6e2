"""Every output of the toolkit written one way (issue 26): checked paths, atomic files, folders
replaced together, one writer per folder.

- :mod:`~interp_rand.output.paths`: an output path checked once, before any work;
- :mod:`~interp_rand.output.files`: a file written atomically, never through a symbolic link,
  with the user's umask, JSON strict;
- :mod:`~interp_rand.output.folder`: an output's files staged and moved into place together;
  a command's claim of its output folder before the work;
- :mod:`~interp_rand.output.lock`: the folder's ``run.lock`` (one writer per folder);
- :mod:`~interp_rand.output.write_error`: a failed write as one line.

Light to import (no torch): the CLI checks paths with it while parsing.
"""

from interp_rand.output.files import append_line, finite_or_none, json_text, write_bytes, write_json, write_text
from interp_rand.output.folder import claim, replace_files, session
from interp_rand.output.paths import OutputError, check_output

__all__ = ["OutputError", "append_line", "check_output", "claim", "finite_or_none", "json_text", "replace_files",
           "session", "write_bytes", "write_json", "write_text"]
