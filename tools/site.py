"""What the site build does besides rendering Markdown; hooks.py hands MkDocs these.

- before each build: provision the models and regenerate the figures whose code
  changed, so a figure can never be stale;
- before each build, too: write the files the live pages fetch (tools/live.py), and
  execute the labs whose source changed (a failing cell
  fails the build); mkdocs-jupyter renders the executed notebooks as pages, and
  under each lab's title go the links to download it and to open it in Colab;
- on each page: turn arithmatex's TeX into MathML, which browsers render natively:
  no math script, no font and no request to any other host;
- images load lazily, so a long chapter does not fetch every figure up front;
- each figure links to its SVG: on a phone the page shows a figure a few hundred pixels
  wide, and its labels are then too small to read;
- under each chapter's title: how long its code took in the last test run, and
  with which versions (measured, never typed), and links to the chapter as a
  notebook, to download or to open in Colab;
- on the home page, the list of chapters, part by part in the nav's order, each with the
  description its front matter gives;
- on the proof table's page: the table, every equality the tests prove, measured where
  the last test run measured it (tools/proofs.py); on the exercises' page, the list of
  every exercise, read from the chapters (tools/exercises.py);
- after the build: write those notebooks, generated from the pages.
"""

import html
import re
from pathlib import Path

import nbformat
from latex2mathml.converter import convert

from snippets import figures
from snippets.book import front_matter, parts
from snippets.hub import provision, use_offline_hub
from tools import exercises, labs, live, notebooks, proofs, timings
from tools.pages import DOCS, lab_notebook_path, notebook_path, pages, parse

CHAPTERS = "<!-- the chapters -->"  # where docs/index.md lists them

MATH = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\s*(?:\\\((?P<inline>.*?)\\\)|\\\[(?P<block>.*?)\\\])'
    r"\s*</(?P=tag)>",
    re.DOTALL,
)
IMG = re.compile(r"<img (?![^>]*\bloading=)")
FIGURE = re.compile(r'<img [^>]*\bsrc="(?P<src>[^"]+\.svg)"[^>]*>')
# what nbconvert's page template adds to every notebook: a MathJax script and its settings,
# and a script that imports Mermaid from cdnjs when the page has a diagram
NBCONVERT_MATHJAX = re.compile(
    r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S
)
NBCONVERT_MERMAID = re.compile(
    r'<script type="module">(?:(?!</script>).)*?jp-Mermaid.*?</script>', re.S
)
NOTEBOOK_MATH = re.compile(r"\$|\\\(|\\\[")


def on_pre_build(config):
    use_offline_hub()
    provision()
    figures.build()
    live.build()
    labs.build_labs()


def is_lab(page) -> bool:
    return page.file.src_uri.startswith("labs/") and page.file.src_uri.endswith(".ipynb")


def on_page_markdown(markdown, page, config, files):
    source = DOCS / page.file.src_uri
    if proofs.MARKER in markdown:
        return markdown.replace(proofs.MARKER, proofs.table(repo_url=config.repo_url))
    if exercises.MARKER in markdown:
        return markdown.replace(exercises.MARKER, exercises.listing())
    if CHAPTERS in markdown:
        return markdown.replace(CHAPTERS, chapter_listing())
    if source.suffix != ".md" or not notebooks.has_notebook(parse(source)):
        return markdown  # not a chapter
    to_root = "../" * page.url.count("/")
    notebook = notebook_path(source)
    links = (
        f'<a href="{to_root}{notebook}" download>:material-download: notebook</a> · '
        f'<a href="{notebooks.colab_url(config.repo_url, notebook)}">'
        ":material-rocket-launch-outline: open in Colab</a>"
    )
    title, _, rest = markdown.partition("\n")
    line = f":material-timer-outline: {timings.provenance(source)} · {links}"
    return f'{title}\n\n<p class="provenance" markdown>{line}</p>\n{rest}'


def chapter_listing() -> str:
    """Each part of the nav, a heading, and its chapters, each linked, with its description:
    the Markdown that replaces CHAPTERS on the home page."""
    out = []
    for title, chapters in parts():
        out += [f"## {title}", ""]
        for name, page in chapters:
            out.append(f"- **[{name}]({page}).** {front_matter(DOCS / page)['description']}")
        out.append("")
    return "\n".join(out)


def on_page_content(content, page, config, files):
    def to_mathml(match):
        tex = match.group("inline") if match.group("inline") is not None else match.group("block")
        display = "inline" if match.group("inline") is not None else "block"
        return convert(html.unescape(tex).strip(), display=display)

    content = MATH.sub(to_mathml, content)
    if is_lab(page):
        content = without_unused_loaders(content, Path(page.file.abs_src_path))
        content = lab_links(content, Path(page.file.src_uri).stem, config.repo_url)
    content = FIGURE.sub(r'<a class="figure-link" href="\g<src>">\g<0></a>', content)
    return IMG.sub(r'<img loading="lazy" ', content)


def without_unused_loaders(content: str, notebook: Path) -> str:
    """nbconvert's page without its MathJax and Mermaid loaders, which fetch from a CDN.
    No lab has math or a diagram; one that does fails the build, here, until they are
    served from the site."""
    markdown = "\n".join(
        cell.source
        for cell in nbformat.read(notebook, as_version=4).cells
        if cell.cell_type == "markdown"
    )
    if NOTEBOOK_MATH.search(markdown) or "```mermaid" in markdown:
        raise ValueError(
            f"{notebook.with_suffix('.py').name}: math or a Mermaid diagram in a lab needs "
            "MathJax or Mermaid served from the site (tools/site.py)"
        )
    content, mathjax = NBCONVERT_MATHJAX.subn("", content)
    content, mermaid = NBCONVERT_MERMAID.subn("", content)
    if (mathjax, mermaid) != (1, 1):
        raise ValueError(f"{notebook.name}: nbconvert's loaders changed; see tools/site.py")
    return content


def lab_links(content: str, name: str, repo_url: str) -> str:
    """Under the lab's title, links to download its notebook and to open it in Colab."""
    colab = notebooks.colab_url(repo_url, lab_notebook_path(name))
    links = (
        f'<p class="provenance"><a href="{name}.ipynb" download>download the notebook</a>'
        f' · <a href="{colab}">open in Colab</a></p>'
    )
    return content.replace("</h1>", "</h1>\n" + links, 1)


def on_page_context(context, page, config, nav):
    if is_lab(page):  # edit the lab's source, not the notebook the build executed
        source = page.file.src_uri.removesuffix(".ipynb") + ".py"
        page.edit_url = f"{config.repo_url.rstrip('/')}/{config.edit_uri.strip('/')}/{source}"
    return context


def on_post_build(config):
    notebooks.write_notebooks(Path(config.site_dir), config.site_url, pages())
