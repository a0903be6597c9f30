"""The JSON line each rank of a native torch.distributed test job reports."""

import json
import os


def report(result: dict) -> None:
    """The rank's JSON line: to $NATIVE_DIST_OUT/rank<r>.json when set (the ranks share torchrun's
    stdout, where long lines interleave), else to stdout."""
    text = json.dumps(result)
    directory = os.environ.get("NATIVE_DIST_OUT")
    if directory:
        with open(os.path.join(directory, f"rank{result['rank']}.json"), "w") as f:
            f.write(text)
    print(text[:2000], flush=True)
