"""MkDocs hooks: the site build's entry into tools/site.py, which says what each does."""

from tools.site import (
    on_page_content,
    on_page_context,
    on_page_markdown,
    on_post_build,
    on_pre_build,
)

__all__ = [
    "on_page_content",
    "on_page_context",
    "on_page_markdown",
    "on_post_build",
    "on_pre_build",
]
