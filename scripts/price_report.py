"""What the questions of a `candor eval` report would cost on a hosted model.

The local model costs nothing, so a report's own cost is $0; this prices the
prompt and output tokens it counted at a hosted model's rates (the local
tokenizer's counts: OpenAI's own will differ somewhat). Embeddings and the AWS
per-request charges are not included.

    python scripts/price_report.py eval-out/dev/report.json [--model gpt-4o-mini]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from candor.settings import DEFAULT_PRICES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--model", default="gpt-4o-mini", choices=sorted(DEFAULT_PRICES))
    args = parser.parse_args()
    agent = json.loads(args.report.read_text())["agent"]
    price = DEFAULT_PRICES[args.model]
    cost = price.cost(agent["tokens_in_per_question"], agent["tokens_out_per_question"])
    print(f"{args.model}: ${cost:.5f} per question over {agent['n']} questions")


if __name__ == "__main__":
    main()
