"""The book's code, one module per subject. Pages include it; tests import it."""
