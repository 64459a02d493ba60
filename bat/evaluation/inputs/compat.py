"""``compat: {unknown_keys: warn}``: the one eval.yaml line for migrating from bat-cli.

bat-cli 2026.10 ignored keys it did not read (a task's ``description``,
``evaluation.timeout_s``, ``models[].temperature``); bat refuses them, so that a typo
cannot fall back to a default silently. A bat-cli project would stop at its first run
with nothing to do but edit every file at once: this switch turns each such key, in
eval.yaml and in the dataset, into a warning naming it, and every refusal of one names
the switch.
"""

from __future__ import annotations

from typing import Literal

UnknownKeys = Literal["refuse", "warn"]
COMPAT_LINE = "compat: {unknown_keys: warn}"
COMPAT_HINT = (
    f"keys bat-cli ignored? add the line `{COMPAT_LINE}` to eval.yaml to make each a "
    "warning while you migrate (docs/eval-formats.md)"
)
