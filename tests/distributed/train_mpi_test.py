#!/usr/bin/env python3
"""Data-parallel `packtrain train` end to end under mpirun (CTest runs one case per test; see CMakeLists.txt).

  equivalence: 2 and 3 ranks, with and without --zero1, reproduce the one-rank data-parallel run with the same
               global batch (ranks * grad_accum = 6 micro-batches' worth of examples) up to the order of fp32
               sums: losses within LOSS_RTOL, gradient norms within NORM_RTOL (relative). The same for 2:4
               sparse training with --zero1 (masks from the gathered masters, masked decay on each rank's
               shard, dense fine-tuning at the end), whose masks must be computed at the same steps with the
               same flips. And BERT's masked-LM training (WordPiece documents), whose masks are drawn per
               example from (seed, epoch, example), on 2 and 3 ranks with --zero1.
  resume:      a ZeRO-1 checkpoint written by 2 ranks resumes on 3 ranks (ZeRO-1) and on one plain process,
               and both continue with the losses of the uninterrupted 2-rank run; the same with 2:4 sparsity,
               resumed between two mask computations (so from the checkpoint's masks). Preemption: SIGTERM to
               rank 1 alone, or SIGUSR1 to mpirun (which forwards it to every rank), stops both ranks after the
               same step with exit status 75 and a checkpoint, and the same command resumes bit for bit.
  hang:        a rank stopped (SIGSTOP) in the middle of training makes the others abort within the collective
               timeout, naming the rank that does not answer.
  scaling:     bench/scaling.py (the multi-GPU scaling run) on 1 and 2 CPU ranks, dense and 2:4: every run
               succeeds, 1 rank x 2 micro-batches gives the 2-rank losses, and a killed rank stops the job and
               the rerun resumes with the uninterrupted losses.

usage: train_mpi_test.py CASE --packtrain BIN --tokenizer tokenizer.json --mpirun MPIEXEC [MPIEXEC ARGS...]
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
WORDPIECE = pathlib.Path(__file__).resolve().parents[1] / "fixtures/tokenizer/wordpiece_bert_uncased.tokenizer.json"
sys.path.insert(0, str(BENCH))
from scaling import mpi_rank_pids  # noqa: E402  the multi-GPU script finds ranks' processes the same way

# fp32 sums in another order: the measured differences are ~1e-9 (loss) and ~3e-8 (grad norm) over 8 steps.
LOSS_RTOL = 2e-5
NORM_RTOL = 2e-4
GLOBAL_MICRO = 6  # micro-batches' worth of examples per step: 1 x 6, 2 x 3, 3 x 2
# 8 steps: dense step 1, sparse steps 2-6 with masks computed before steps 2, 4 and 6, dense steps 7-8. dW from
# the dense output gradient, since MVUE draws are seeded per micro-batch, which rank counts number differently;
# a masked decay large enough to change the trajectory.
SPARSE = ["--sparse24", "--mask-every", "2", "--dense-warmup", "1", "--dense-finetune", "0.25", "--masked-decay",
          "0.05", "--sparse-dw", "dense"]

RECORDS_TEXT = "the {a} sat on the {p} {n}. the {a} is happy."


def records_jsonl():
    animals = ["cat", "dog", "bird", "fox", "owl", "bee"]
    places = ["mat", "log", "tree", "den", "barn", "hive"]
    lines = []
    for i in range(300):
        text = RECORDS_TEXT.format(a=animals[i % 6], p=places[i * 7 // 3 % 6], n=i % 10)
        if i % 3 == 1:  # some prompts without loss, so ranks' loss-token counts differ from their tokens
            lines.append(json.dumps({"prompt": f"where is the {animals[i % 6]}? ", "completion": text}))
        else:
            lines.append(json.dumps({"text": text}))
    return "\n".join(lines) + "\n"


class Fixture:
    def __init__(self, args):
        self.args = args
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="packtrain-dist-train-"))
        (self.dir / "records.jsonl").write_text(records_jsonl())
        (self.dir / "config.json").write_text(json.dumps({
            "model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
            "num_key_value_heads": 1, "intermediate_size": 64, "vocab_size": 260}))
        subprocess.run([args.packtrain, "prepare", "--input", str(self.dir / "records.jsonl"), "--tokenizer",
                        args.tokenizer, "--output", str(self.dir / "data"), "--max-len", "96",
                        "--val-fraction", "0.1"], check=True, capture_output=True)
        # BERT: the same records as [CLS] ... [SEP] documents of the WordPiece fixture's vocabulary.
        (self.dir / "bert.json").write_text(json.dumps({
            "model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
            "intermediate_size": 64, "max_position_embeddings": 96, "vocab_size": 2000}))
        subprocess.run([args.packtrain, "prepare", "--input", str(self.dir / "records.jsonl"), "--tokenizer",
                        str(WORDPIECE), "--output", str(self.dir / "bert_data"), "--max-len", "96", "--add-bos",
                        "--val-fraction", "0.1"], check=True, capture_output=True)

    def train_cmd(self, ranks, out, *extra, steps=8, grad_accum=None, backend="mpi", data="data",
                  model="config.json"):
        cmd = [] if ranks == 0 else self.args.mpirun + ["-np", str(ranks)]
        return cmd + [
            self.args.packtrain, "train", "--data", str(self.dir / data), "--model", str(self.dir / model),
            "--out", str(self.dir / out), "--device", "cpu", "--threads", "1", "--strategy", "flatten",
            "--examples", "4", "--grad-accum", str(grad_accum or GLOBAL_MICRO // max(ranks, 1)),
            "--steps", str(steps), "--lr", "3e-3", "--eval-every", "0", "--save-every", "0",
            "--dist-backend", backend, *extra]

    def train(self, ranks, out, *extra, **kw):
        """ranks 0: one plain process (no mpirun)."""
        r = subprocess.run(self.train_cmd(ranks, out, *extra, **kw), capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            sys.exit(f"FAILED: {' '.join(r.args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r.stderr

    def steps(self, out):
        """step -> (loss, grad_norm) of the train records in metrics.jsonl."""
        steps = {}
        for line in (self.dir / out / "metrics.jsonl").read_text().splitlines():
            r = json.loads(line)
            if r["type"] == "train":
                steps[r["step"]] = (r["loss"], r["grad_norm"])
        return steps

    def records(self, out):
        return [json.loads(line) for line in (self.dir / out / "metrics.jsonl").read_text().splitlines()]

    def masks(self, out):
        """step -> flips of the "masks" records (mask computations) in metrics.jsonl."""
        return {r["step"]: r.get("flips", 0) for r in self.records(out) if r["type"] == "masks"}


failures = []


def expect_close(what, ref, got, steps):
    if sorted(got) != list(steps):
        failures.append(f"{what}: logged steps {sorted(got)}, expected {list(steps)}")
        return
    worst_loss = max(abs(got[s][0] - ref[s][0]) / abs(ref[s][0]) for s in steps)
    worst_norm = max(abs(got[s][1] - ref[s][1]) / abs(ref[s][1]) for s in steps)
    ok = worst_loss <= LOSS_RTOL and worst_norm <= NORM_RTOL
    print(f"{'ok  ' if ok else 'FAIL'} {what}: max relative difference loss {worst_loss:.2e} (<= {LOSS_RTOL:g}), "
          f"grad norm {worst_norm:.2e} (<= {NORM_RTOL:g})")
    if not ok:
        failures.append(f"{what}: {json.dumps(ref)} vs {json.dumps(got)}")


def expect(what, condition, detail=""):
    print(f"{'ok  ' if condition else 'FAIL'} {what}")
    if not condition:
        failures.append(f"{what} {detail}")


def case_equivalence(f):
    f.train(1, "w1")
    ref = f.steps("w1")
    for ranks in (2, 3):
        for zero1 in (False, True):
            out = f"w{ranks}{'z' if zero1 else ''}"
            # Small buckets, so that backward starts several of them before it ends.
            log = f.train(ranks, out, "--bucket-mb", "0.01", *(["--zero1"] if zero1 else []))
            expect_close(f"{ranks} ranks{' ZeRO-1' if zero1 else ''} vs 1 rank", ref, f.steps(out), range(1, 9))
            last = [r for r in f.records(out) if r["type"] == "train"][-1]
            expect(f"{out}: metrics name the world size and the token imbalance",
                   last["world_size"] == ranks and 1 <= last["token_imbalance"] < 1.5 and last["comm_wait_s"] >= 0
                   and last["min_rank_tokens_per_s"] > 0, json.dumps(last))
            expect(f"{out}: only rank 0 logs", log.count("final model") == 1, log)
            overlap = re.search(r"gradient reduction: (\d+) of (\d+) buckets started during the backward pass", log)
            expect(f"{out}: every bucket's reduction started during backward (none left to the end)",
                   overlap is not None and int(overlap[2]) > 2 and overlap[1] == overlap[2], log[-2000:])
    # The same global step on every rank count: the final weights agree to fp32 noise, not bit for bit.
    expect("the 1-rank run's final model exists", (f.dir / "w1/final/model.safetensors").exists())

    f.train(1, "s1", *SPARSE)
    ref, ref_masks = f.steps("s1"), f.masks("s1")
    expect("the sparse reference computes its masks before steps 2, 4 and 6", sorted(ref_masks) == [2, 4, 6],
           json.dumps(ref_masks))
    for ranks in (2, 3):
        out = f"s{ranks}z"
        log = f.train(ranks, out, "--bucket-mb", "0.01", "--zero1", *SPARSE)
        expect_close(f"{ranks} ranks ZeRO-1 2:4 sparse vs 1 rank", ref, f.steps(out), range(1, 9))
        expect(f"{out}: the masks are computed at the same steps with the same flips", f.masks(out) == ref_masks,
               f"{json.dumps(f.masks(out))} vs {json.dumps(ref_masks)}")
        expect(f"{out}: the log names the sharded masters and gives the optimizer state per rank",
               "ZeRO-1 (masters and moments sharded)" in log and
               "MiB of fp32 master weights and AdamW moments per rank" in log, log[-2000:])

    bert = dict(data="bert_data", model="bert.json")
    f.train(1, "b1", "--objective", "mlm", **bert)
    ref = f.steps("b1")
    for ranks in (2, 3):
        out = f"b{ranks}z"
        f.train(ranks, out, "--bucket-mb", "0.01", "--zero1", "--objective", "mlm", **bert)
        expect_close(f"{ranks} ranks ZeRO-1 BERT masked LM vs 1 rank", ref, f.steps(out), range(1, 9))


def case_resume(f):
    f.train(2, "full", "--zero1")
    ref = f.steps("full")
    f.train(2, "stopped", "--zero1", "--stop-after", "3")
    state = json.loads((f.dir / "stopped/checkpoints/step-00000003/trainer_state.json").read_text())
    expect("the checkpoint records the data position in examples", state.get("position", -1) > 0, str(state))
    for ranks, extra, backend in ((3, ["--zero1"], "mpi"), (0, [], "auto")):
        out = f"resumed{ranks}"
        shutil.copytree(f.dir / "stopped", f.dir / out)
        log = f.train(ranks, out, *extra, backend=backend, grad_accum=GLOBAL_MICRO // max(ranks, 1))
        expect(f"{out} resumed from step 3", "at step 3" in log, log)
        expect_close(f"2-rank ZeRO-1 checkpoint resumed on {ranks or 'one process'}", ref, f.steps(out),
                     range(1, 9))
    # 2:4 sparse: stopped after step 4, so step 5 needs the checkpoint's masks (computed before step 4).
    f.train(2, "sfull", "--zero1", *SPARSE)
    ref = f.steps("sfull")
    f.train(2, "sstopped", "--zero1", *SPARSE, "--stop-after", "4")
    for ranks, extra, backend in ((3, ["--zero1"], "mpi"), (0, [], "auto")):
        out = f"sresumed{ranks}"
        shutil.copytree(f.dir / "sstopped", f.dir / out)
        log = f.train(ranks, out, *extra, *SPARSE, backend=backend, grad_accum=GLOBAL_MICRO // max(ranks, 1))
        expect(f"{out} resumed from step 4", "at step 4" in log, log)
        expect_close(f"2-rank ZeRO-1 2:4 sparse checkpoint resumed on {ranks or 'one process'}", ref, f.steps(out),
                     range(1, 9))
        expect(f"{out}: the masks are computed at the same steps as uninterrupted", f.masks(out) == f.masks("sfull"),
               f"{json.dumps(f.masks(out))} vs {json.dumps(f.masks('sfull'))}")
    check_preemption(f)
    # A single-process checkpoint cannot continue data-parallel: a clear error, not a silent data change.
    f.train(0, "single", "--stop-after", "2", backend="auto")
    r = subprocess.run(f.train_cmd(2, "single"), capture_output=True, text=True, timeout=120)
    expect("a single-process checkpoint on 2 ranks is refused", r.returncode != 0 and
           "a single-process run wrote this checkpoint" in r.stderr, r.stderr[-2000:])


def preempt(f, out, steps, signal_job):
    """Runs `out` on 2 ranks, calls signal_job(job) once a step is logged; (exit status, output)."""
    job = subprocess.Popen(f.train_cmd(2, out, steps=steps), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    output = []
    try:
        for line in job.stdout:
            output.append(line)
            if line.startswith("step") and f"/{steps} " in line:
                signal_job(job)
                break
        rest, _ = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
    return job.returncode, "".join(output) + rest


def check_preemption(f):
    steps = 30
    f.train(2, "pref", steps=steps)
    ref = f.steps("pref")

    def to_rank_1(job):
        pid = mpi_rank_pids(f.dir / "prank", 2).get(1)
        expect("found rank 1's process", pid is not None)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)

    for out, what, signal_job in (("prank", "SIGTERM to rank 1", to_rank_1),
                                  ("prun", "SIGUSR1 to mpirun", lambda job: job.send_signal(signal.SIGUSR1))):
        status, log = preempt(f, out, steps, signal_job)
        stopped = re.findall(r"stopped at step (\d+) of 30 on (\S+)", log)
        expect(f"{what}: the job exits 75 after rank 0 names the step both ranks stopped at",
               status == 75 and len(stopped) == 1, f"exit {status}:\n{log[-3000:]}")
        if not stopped:
            continue
        step = int(stopped[0][0])
        latest = (f.dir / out / "checkpoints" / "latest").read_text().strip()
        expect(f"{what}: stopped at step {step} of {steps} with its checkpoint, the last step logged",
               step < steps and latest == f"step-{step:08}" and max(f.steps(out)) == step, f"{latest}\n{log[-3000:]}")
        f.train(2, out, steps=steps)
        got = f.steps(out)
        expect(f"{what}: the same command resumes bit for bit", got == ref,
               f"{json.dumps(got)} vs {json.dumps(ref)}")


def case_hang(f):
    out = f.dir / "hang"
    cmd = f.train_cmd(3, "hang", "--dist-timeout", "2", steps=100000)
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, stopped = [], None
    try:
        for line in job.stdout:  # wait until training is under way
            output.append(line)
            if line.startswith("step") and "/100000" in line and int(line.split()[1].split("/")[0]) >= 3:
                break
        stopped = mpi_rank_pids(out, 3).get(1)
        expect("found rank 1's process", stopped is not None, "".join(output))
        if stopped is None:
            return
        os.kill(stopped, signal.SIGSTOP)
        t0 = time.monotonic()
        rest, _ = job.communicate(timeout=60)
        elapsed = time.monotonic() - t0
        text = "".join(output) + rest
        expect(f"the job ended {elapsed:.1f} s after rank 1 stopped (timeout 2 s)", job.returncode != 0 and
               elapsed < 30, f"exit {job.returncode}")
        expect("the others name the collective and the rank that does not answer",
               "did not complete within 2 s" in text and "rank 1: no answer" in text, text[-3000:])
    finally:
        if job.poll() is None:
            job.kill()
        if stopped is not None:
            try:
                os.kill(stopped, signal.SIGKILL)
            except ProcessLookupError:
                pass


def case_scaling(f):
    script = BENCH / "scaling.py"
    out = f.dir / "scaling"
    out.mkdir()
    r = subprocess.run([sys.executable, str(script), "--packtrain", f.args.packtrain, "--data", str(f.dir / "data"),
                        "--out", str(out), "--model", str(f.dir / "config.json"), "--device", "cpu", "--ranks", "1,2",
                        "--examples", "4", "--steps", "6", "--skip", "1", "--dist-timeout", "10", "--timeout", "60",
                        "--mpirun", " ".join(f.args.mpirun)], capture_output=True, text=True, timeout=170)
    print(r.stdout[-2500:])
    expect("bench/scaling.py passes its own checks", r.returncode == 0, r.stderr[-2000:])
    records = [json.loads(line) for line in (out / "scaling.jsonl").read_text().splitlines()] \
        if (out / "scaling.jsonl").exists() else []
    kinds = sorted({rec["bench"] for rec in records})
    expect("it measured scaling, the same-batch losses and the kill-and-resume run",
           kinds == ["scaling", "scaling_kill", "scaling_losses"], str(kinds))
    runs = [rec for rec in records if rec["bench"] == "scaling"]
    expect("six configurations (dense and 2:4; 1 rank, 2 ranks, 2 ranks ZeRO-1) with their efficiency",
           len(runs) == 6 and all(rec["status"] == "ok" and rec["efficiency"] > 0 for rec in runs),
           json.dumps(runs)[:2000])
    expect("the report table was written", (out / "SCALING.md").exists())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=["equivalence", "resume", "hang", "scaling"])
    p.add_argument("--packtrain", required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--mpirun", nargs=argparse.REMAINDER, required=True)
    args = p.parse_args()
    f = Fixture(args)
    try:
        {"equivalence": case_equivalence, "resume": case_resume, "hang": case_hang,
         "scaling": case_scaling}[args.case](f)
    finally:
        shutil.rmtree(f.dir, ignore_errors=True)
    if failures:
        print("FAILED:\n" + "\n".join(failures))
        return 1
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
