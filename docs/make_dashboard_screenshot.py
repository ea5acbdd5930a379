"""Regenerate docs/dashboard.png: a `tracelake dashboard` page over a warehouse of tagged runs.

    DO_NOT_TRACK=1 .venv/bin/python docs/make_dashboard_screenshot.py [--out docs/dashboard.png]
                                                                     [--workdir DIR] [--height PX]

The warehouse holds the test traces (tests/data/traces, from TraceLens, MIT licence), tagged by
model / mode / run where we know them, plus synthetic later runs made from two of them
(tests/reports/trace_variants.py scales some kernels' durations), so two groups have three
consecutive runs:

- bert-small, inference, H100: r1 = the real trace; r2 = elementwise kernels 1.3x slower;
  r3 = also GEMM kernels 1.6x slower (the regression the dashboard should surface).
- resnet50, training, MI300X: r1 = the real trace; r2 = convolution kernels (igemm, transposes)
  10 % faster; r3 = also batch-norm kernels 1.4x slower.

- hta-ranks, training: two ranks of one distributed job (tests/data/hta, a real 2-rank HTA sample) as
  run j1, and the same two ranks with GEMM and NCCL kernels 1.25x slower as run j2: each run is one
  column (the mean over its ranks, their spread in the tooltip), never a rank-to-rank comparison.
- two bert-small training traces share the run tag r1 without being ranks of one job: the page
  shows them as one run and says so in a note.

Runs r1 and r3 of bert-small are analyzed (`tracelake analyze`), so their rows link to analysis.md.
The screenshot is Chromium at 1400 px wide, the page's full height (or --height), saved as an
adaptive-palette PNG (< 1 MB), taken once the page's Vega charts have drawn (tests/reports/headless.py
gives the scripts virtual time first); a console message from the page fails it. Needs the
`chromium` package (apt-get install chromium).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.reports.headless import open_page, page_height  # noqa: E402
from tests.reports.trace_variants import write_slower_run  # noqa: E402

TRACES = ROOT / "tests" / "data" / "traces"
HTA = ROOT / "tests" / "data" / "hta"
BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
RESNET = TRACES / "mi300" / "resnet_act_checkpoint.json.gz"
WIDTH = 1400
MAX_HEIGHT = 9000

# (source, file name of the run, [(kernel name regex, duration factor), ...], tags)
RUNS = [
    (BERT, "bert_r1.json.gz", [], "model=bert-small mode=inference run=r1"),
    (BERT, "bert_r2.json.gz", [("elementwise", 1.3)], "model=bert-small mode=inference run=r2"),
    (BERT, "bert_r3.json.gz", [("elementwise", 1.3), ("gemm|cutlass", 1.6)], "model=bert-small mode=inference run=r3"),
    (RESNET, "resnet_r1.json.gz", [], "model=resnet50 mode=training run=r1"),
    (RESNET, "resnet_r2.json.gz", [("igemm|batched_transpose", 0.9)], "model=resnet50 mode=training run=r2"),
    (RESNET, "resnet_r3.json.gz", [("igemm|batched_transpose", 0.9), ("batch_norm", 1.4)],
     "model=resnet50 mode=training run=r3"),
]
# real traces ingested as they are: (path, tags)
OTHERS = [
    (TRACES / "h100" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "model=qwen1.5-0.5b mode=inference run=r1"),
    (TRACES / "mi300" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "model=qwen1.5-0.5b mode=inference run=r1"),
    (TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz", "model=bert-small mode=inference run=r1"),
    (TRACES / "inference" / "sglang_decode" / "sglang_Qwen3-8B_decode.json.gz", "model=qwen3-8b mode=inference run=sglang"),
    (TRACES / "b200" / "eager_trace.json.gz", ""),
    (TRACES / "torch_compile_triton" / "trace.json.gz", ""),
    (HTA, "model=hta-ranks mode=training run=j1"),
]
# ranks of a second run of the distributed job: (source rank, folder of the job, kernel regex, factor)
RANK_RUNS = [(HTA / name, "hta_j2", "gemm|cutlass|nccl", 1.25) for name in ("sampled_rank-0.json.gz", "sampled_rank-1.json.gz")]
# two traces under one run tag that are not ranks of one job: a tag collision the page notes
COLLISION = [(BERT, "bert_train_a.json.gz", "elementwise", 1.0), (BERT, "bert_train_b.json.gz", "elementwise", 1.2)]


def tracelake(*args: str) -> str:
    env = {**os.environ, "DO_NOT_TRACK": "1"}
    done = subprocess.run([sys.executable, "-m", "tracelake", *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"tracelake {' '.join(args[:2])} failed: {done.stderr.strip()}")
    return done.stdout


def tag_args(tags: str) -> list[str]:
    return [arg for tag in tags.split() for arg in ("--tag", tag)]


def build(workdir: Path) -> Path:
    warehouse = workdir / "warehouse"
    runs = workdir / "runs"
    for source, name, changes, tags in RUNS:
        path = runs / name
        if not changes:
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, path)
        else:
            # each change applies on top of the previous ones (r3 keeps r2's change)
            current = source
            for index, (pattern, factor) in enumerate(changes):
                step = path if index == len(changes) - 1 else runs / f".{name}.step{index}.json"
                write_slower_run(current, step, pattern, factor)
                current = step
        tracelake("ingest", str(path), "--warehouse", str(warehouse), "--quiet", *tag_args(tags))
    for path, tags in OTHERS:
        tracelake("ingest", str(path), "--warehouse", str(warehouse), "--quiet", *tag_args(tags))
    for source, folder, pattern, factor in RANK_RUNS:
        write_slower_run(source, runs / folder / source.name, pattern, factor)
    tracelake("ingest", str(runs / "hta_j2"), "--warehouse", str(warehouse), "--quiet",
              *tag_args("model=hta-ranks mode=training run=j2"))
    for source, name, pattern, factor in COLLISION:
        write_slower_run(source, runs / name, pattern, factor)
        tracelake("ingest", str(runs / name), "--warehouse", str(warehouse), "--quiet",
                  *tag_args("model=bert-small mode=training run=r1"))
    for name in ("bert_r1.json.gz", "bert_r3.json.gz"):
        tracelake("analyze", str(runs / name), "--warehouse", str(warehouse), "--out",
                  str(workdir / "reports" / name.split(".")[0]), "--quiet")
    return Path(tracelake("dashboard", "--warehouse", str(warehouse)).strip())


def screenshot(index: Path, out: Path, height: int | None) -> None:
    height = height or min(page_height(index, WIDTH), MAX_HEIGHT)
    raw = out.with_name(f".{out.stem}.raw.png")
    run = open_page(index, screenshot=raw, window=(WIDTH, height))
    if run.returncode != 0 or not raw.is_file():
        raise SystemExit(f"chromium failed: {run.stderr[-800:]}")
    if run.console_messages:
        raise SystemExit("the page logged to the console:\n" + "\n".join(run.console_messages))
    with Image.open(raw) as image:
        image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
    raw.unlink()
    print(f"{out}  {WIDTH}x{height}  {out.stat().st_size / 1024:.0f} KiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard.png")
    parser.add_argument("--workdir", type=Path, help="Keep the warehouse, runs and dashboard here (default: a temp folder).")
    parser.add_argument("--height", type=int, help="Screenshot height in px (default: the whole page).")
    args = parser.parse_args()
    if args.workdir:
        if args.workdir.exists():
            raise SystemExit(f"{args.workdir} exists; pass a new folder")
        index = build(args.workdir)
        screenshot(index, args.out, args.height)
        print(f"dashboard: {index}")
        return
    with tempfile.TemporaryDirectory(prefix="tracelake-dashboard-demo-") as workdir:
        screenshot(build(Path(workdir)), args.out, args.height)


if __name__ == "__main__":
    main()
