"""The ``kafkastore`` command line (:func:`main`)."""

from kafkastore.cli.local import EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, main

__all__ = ["main", "EXIT_OK", "EXIT_PROBLEM", "EXIT_USAGE"]
