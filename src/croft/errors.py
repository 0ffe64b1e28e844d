"""Errors that reach a user as one sentence and a non-zero exit, never as a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix: the message names what is wrong and how to fix it.

    `exit_code` is what `croft` exits with (1 unless a command says otherwise)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
