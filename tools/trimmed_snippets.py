"""pymdownx.snippets, with the blank lines at either end of an included section dropped,
and no more than two in a row inside it.

A section of a snippets/ module ends with the two blank lines the formatter leaves after a
function, and a page leaves two more after its include line; a section that holds others
keeps the blank lines around their markers, which are dropped. Without the trim, the code
on the page would show four blank lines where the source has two. mkdocs.yml names this
extension in place of pymdownx.snippets, with the same options, and tools/pages.py expands
the pages' includes with it, so the code the tests run is the code the site shows.
"""

from pymdownx.snippets import SnippetExtension, SnippetPreprocessor


class TrimmedSnippetPreprocessor(SnippetPreprocessor):
    def extract_section(self, section, lines):
        lines = super().extract_section(section, lines)
        start, end = 0, len(lines)
        while start < end and not lines[start].strip():
            start += 1
        while end > start and not lines[end - 1].strip():
            end -= 1
        kept = []
        for line in lines[start:end]:
            if line.strip() or len(kept) < 2 or kept[-1].strip() or kept[-2].strip():
                kept.append(line)
        return kept


class TrimmedSnippetExtension(SnippetExtension):
    def extendMarkdown(self, md):
        self.md = md
        md.registerExtension(self)
        md.preprocessors.register(TrimmedSnippetPreprocessor(self.getConfigs(), md), "snippet", 32)


def makeExtension(**kwargs):
    return TrimmedSnippetExtension(**kwargs)
