import argparse

from snippets.hub import provision, use_offline_hub

use_offline_hub()  # before the figure modules import transformers

from snippets import figures  # noqa: E402

parser = argparse.ArgumentParser(prog="python -m snippets.figures", description=figures.__doc__)
parser.add_argument("--all", action="store_true", help="redraw every figure, changed or not")
args = parser.parse_args()
provision()
drawn = figures.build(force=args.all)
print(f"figures: {len(drawn)} drawn, {len(figures.REGISTRY) - len(drawn)} up to date")
