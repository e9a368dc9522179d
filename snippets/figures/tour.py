"""The landing page's map of the book: each part of the nav as a row of its chapters,
in nav order, with the shape of the tensor each chapter hands to the next, as each
chapter's front matter gives them."""

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

from snippets.book import DOCS, MKDOCS_YML, front_matter, parts
from snippets.figures import figure

COLOURS = ["#3f51b5", "#6a1b9a", "#00897b", "#e65100", "#546e7a", "#ad1457"]
CHAPTERS = tuple(DOCS / page for _, chapters in parts() for _, page in chapters)


def rows() -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Each part, in nav order: (title, [(box label, page, what it hands on)]), read from
    each chapter's front matter, `tour: {label: ..., hands_on: ...}`."""
    found = []
    for title, chapters in parts():
        boxes = []
        for _, page in chapters:
            tour = front_matter(DOCS / page).get("tour")
            if not isinstance(tour, dict) or set(tour) != {"label", "hands_on"}:
                raise ValueError(
                    f"docs/{page}: the tour draws a box per chapter from the page's front "
                    'matter, `tour:` with `label: "Short\\nname"` and `hands_on: "(B, T, C)"` '
                    "(the shape of the tensor it hands on); see docs/contributing.md"
                )
            boxes.append((tour["label"], page, tour["hands_on"]))
        found.append((title, boxes))
    return found


@figure("tour.svg", inputs=(MKDOCS_YML, *CHAPTERS))
def tour():
    tour = rows()
    columns = max(len(chapters) for _, chapters in tour)
    box_w, box_h, gap, row_h = 1.05, 0.58, 0.16, 1.55
    width = columns * (box_w + gap) - gap + 0.1
    height = row_h * (len(tour) - 1) + box_h + 1.8
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))  # one data unit is one inch: text fits the boxes
    for row, (title, chapters) in enumerate(tour):
        colour = COLOURS[row % len(COLOURS)]
        y = row_h * (len(tour) - 1 - row)
        ax.text(0, y + box_h + 0.22, title, fontsize=10, weight="bold", color=colour)
        for i, (name, _, hands_on) in enumerate(chapters):
            x = i * (box_w + gap)
            ax.add_patch(
                FancyBboxPatch(
                    (x, y),
                    box_w,
                    box_h,
                    boxstyle="round,pad=0.03",
                    facecolor=colour,
                    edgecolor=colour,
                    linewidth=1.3,
                )
            )
            ax.text(
                x + box_w / 2,
                y + box_h / 2,
                name,
                ha="center",
                va="center",
                fontsize=8.5,
                color="white",
            )
            ax.text(
                x + box_w / 2,
                y - 0.12,
                hands_on,
                ha="center",
                va="top",
                fontsize=7.5,
                color="#555555",
                family="monospace",
            )
            if i:
                ax.annotate(
                    "",
                    xy=(x - 0.03, y + box_h / 2),
                    xytext=(x - gap + 0.03, y + box_h / 2),
                    arrowprops={
                        "arrowstyle": "-|>",
                        "color": colour,
                        "lw": 1.1,
                        "shrinkA": 0,
                        "shrinkB": 0,
                    },
                )
    ax.text(
        0,
        -0.75,
        "B batch · T tokens · C hidden size · H heads · D head size · V vocabulary · L layers\n"
        "M masked tokens",
        fontsize=8,
        color="#555555",
        va="top",
    )
    ax.set_xlim(-0.05, width - 0.05)
    ax.set_ylim(-1.3, height - 1.3)
    ax.axis("off")
    return fig
