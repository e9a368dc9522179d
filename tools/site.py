"""What the site build does besides rendering Markdown; hooks.py hands MkDocs these.

- before each build: provision the models and regenerate the figures whose code
  changed, so a figure can never be stale;
- before each build, too: execute the labs whose source changed (a failing cell
  fails the build), then render each as a Markdown page with its figures;
- on each page: turn arithmatex's TeX into MathML, which browsers render natively:
  no math script, no font and no request to any other host;
- images load lazily, so a long chapter does not fetch every figure up front;
- under each chapter's title: how long its code took in the last test run, and
  with which versions (measured, never typed), and links to the chapter as a
  notebook, to download or to open in Colab;
- after the build: write those notebooks, generated from the pages.
"""

import html
import re
from pathlib import Path

import nbformat
from latex2mathml.converter import convert
from mkdocs.structure.files import File

from snippets import figures
from snippets.hub import provision, use_offline_hub
from tools import labs, notebooks, timings
from tools.pages import DOCS, LABS, notebook_path, pages, parse

MATH = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\s*(?:\\\((?P<inline>.*?)\\\)|\\\[(?P<block>.*?)\\\])'
    r"\s*</(?P=tag)>",
    re.DOTALL,
)
IMG = re.compile(r"<img (?![^>]*\bloading=)")


def on_pre_build(config):
    use_offline_hub()
    provision()
    figures.build()
    labs.build_labs()


def on_files(files, config):
    for lab in sorted(LABS.glob("*.py")):
        executed = nbformat.read(lab.with_suffix(".ipynb"), as_version=4)
        markdown, images = labs.lab_page(executed, lab.stem, config.repo_url)
        files.append(File.generated(config, f"labs/{lab.stem}.md", content=markdown))
        for name, data in images.items():
            files.append(File.generated(config, f"labs/{lab.stem}/{name}", content=data))
    return files


def on_page_markdown(markdown, page, config, files):
    source = DOCS / page.file.src_uri
    if page.file.generated_by or not notebooks.has_notebook(parse(source)):
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


def on_page_content(content, page, config, files):
    def to_mathml(match):
        tex = match.group("inline") if match.group("inline") is not None else match.group("block")
        display = "inline" if match.group("inline") is not None else "block"
        return convert(html.unescape(tex).strip(), display=display)

    content = MATH.sub(to_mathml, content)
    return IMG.sub(r'<img loading="lazy" ', content)


def on_page_context(context, page, config, nav):
    if page.file.generated_by and page.file.src_uri.startswith("labs/"):  # edit the lab's source
        source = page.file.src_uri.removesuffix(".md") + ".py"
        page.edit_url = f"{config.repo_url.rstrip('/')}/{config.edit_uri.strip('/')}/{source}"
    return context


def on_post_build(config):
    notebooks.write_notebooks(Path(config.site_dir), config.site_url, pages())
