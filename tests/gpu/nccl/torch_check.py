#!/usr/bin/env python3
"""Two-process PyTorch check of an NCCL library (weft's, loaded in NCCL's place, or NCCL).

Usage: torch_check.py OUT.json [--expect-weft | --expect-nccl]

Starts two processes with torch.distributed, backend "nccl", rank r on GPU r % (GPUs
present): one per GPU, or both on cuda:0 when the machine has one GPU (a shared GPU checks
correctness only; NCCL itself refuses two ranks on one GPU, so --expect-nccl then skips). It runs
all_reduce (several types and ops, small and large), all_gather_into_tensor,
reduce_scatter_tensor, broadcast, all_to_all_single, send/recv and three steps of a small
DistributedDataParallel model, checks every result against values computed on the host
(the DDP steps against the same model trained on the host in float64 on both ranks' batches),
and writes one JSON file: per check pass/fail, the model's parameters after each step
(digests), which libnccl files the processes had mapped, and -- what decides -- which
library answered libtorch_cuda.so's ncclAllReduce and ncclGetVersion (read from its bound
GOT slots by nccl_which.py) with that library's runtime ncclGetVersion.
(torch.cuda.nccl.version() is the header PyTorch was built with, not the library that
runs: it is recorded as "torch_built_with_nccl" only.) Run it twice (weft first on the
library path and in LD_PRELOAD, then without) and compare the files with torch_compare.py.
--expect-weft fails unless weft's library (22800) answered on every rank; --expect-nccl
fails unless a library that is not weft's answered on every rank.
Exit status: 0 when every check passed, 1 otherwise, 77 without a GPU (or --expect-nccl on
one GPU).
"""
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # nccl_which, also in spawned ranks


def mapped_nccl():
    """The libnccl-like libraries mapped into this process (paths)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            base = os.path.basename(path)
            if "nccl" in base and ".so" in base:
                libs.add(path)
    return sorted(libs)


def make_model(torch):
    """The DDP check's model, initialized from a fixed seed on the host."""
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


def batch(torch, gen):
    return torch.randn(32, 64, generator=gen), torch.randint(0, 10, (32,), generator=gen)


def host_ddp_reference(torch, world, steps):
    """What DDP must compute: each step, the gradient of the mean of the ranks' losses (each
    rank's loss on its own batch), applied by SGD; trained on the host in float64. Returns per
    step the ranks' losses before the update and the flat parameters after it."""
    model = make_model(torch).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gens = [torch.Generator().manual_seed(100 + r) for r in range(world)]
    out = []
    for _ in range(steps):
        data = [batch(torch, g) for g in gens]
        opt.zero_grad()
        losses = [torch.nn.functional.cross_entropy(model(x.double()), y) for x, y in data]
        (sum(losses) / world).backward()
        opt.step()
        out.append(([loss.item() for loss in losses],
                    torch.cat([p.detach().flatten() for p in model.parameters()]).clone()))
    return out


def worker(rank, world, out_dir, port):
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    gpu = rank % torch.cuda.device_count()  # one GPU: both ranks share cuda:0
    torch.cuda.set_device(gpu)
    dev = torch.device("cuda", gpu)
    res = {"rank": rank, "gpu": gpu, "checks": {}, "errors": []}
    try:
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
        built = torch.cuda.nccl.version()
        res["torch_built_with_nccl"] = list(built) if isinstance(built, tuple) else built
        res["libraries"] = mapped_nccl()
        # Which library libtorch_cuda.so's calls land in (its GOT slots are bound by now:
        # init_process_group with device_id creates the communicator eagerly).
        warm = torch.ones(1, device=dev)
        dist.all_reduce(warm)
        torch.cuda.synchronize()
        try:
            import nccl_which
            res["answering"] = [nccl_which.answering("libtorch_cuda.so", s)
                                for s in ("ncclAllReduce", "ncclGetVersion")]
        except Exception:  # recorded; main() then fails the run (the library is unknown)
            res["errors"].append("nccl_which: " + traceback.format_exc())

        def check(name, got, want, tol=0.0):
            got = got.detach().to("cpu")
            want = want.to("cpu")
            if got.shape != want.shape:
                ok = False
            elif tol == 0.0:
                ok = bool(torch.equal(got, want))
            else:
                ok = bool(torch.allclose(got.double(), want.double(), rtol=tol, atol=tol))
            res["checks"][name] = ok
            if not ok:
                diff = (got.double() - want.double()).abs() if got.shape == want.shape else None
                res["errors"].append(f"{name}: mismatch" + (f", max |diff| {diff.max().item()}" if diff is not None else ", shape"))

        def val(r, n, dtype, scale=1):
            # Small integers: every sum, product, max, min is exact in every type.
            return ((torch.arange(n, dtype=torch.int64) % 7 + r + 1) * scale).to(dtype)

        # all_reduce: types x ops, small (LL) and large (Simple) sizes.
        for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.float64):
            for n in (1, 1000, 3 * 1024 * 1024 + 5):
                for op_name, op in (("sum", dist.ReduceOp.SUM), ("max", dist.ReduceOp.MAX),
                                    ("min", dist.ReduceOp.MIN), ("prod", dist.ReduceOp.PRODUCT)):
                    if n > 1000 and op_name in ("prod", "min"):
                        continue
                    t = val(rank, n, dtype).to(dev)
                    dist.all_reduce(t, op=op)
                    vals = [val(r, n, torch.float64) for r in range(world)]
                    if op_name == "sum":
                        want = sum(vals)
                    elif op_name == "max":
                        want = torch.stack(vals).max(0).values
                    elif op_name == "min":
                        want = torch.stack(vals).min(0).values
                    else:
                        want = torch.stack(vals).prod(0)
                    check(f"all_reduce.{str(dtype)[6:]}.{op_name}.{n}", t.double(), want)
        t = val(rank, 4096, torch.float32).to(dev)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        check("all_reduce.float32.avg.4096", t, sum(val(r, 4096, torch.float64) for r in range(world)) / world, 1e-6)

        # PreMulSum (ncclRedOpCreatePreMulSum), where this torch offers it.
        if hasattr(dist, "_make_nccl_premul_sum"):
            t = val(rank, 5000, torch.float32).to(dev)
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(float(rank + 2)))
            want = sum((r + 2) * val(r, 5000, torch.float64) for r in range(world))
            check("all_reduce.float32.premul_sum.5000", t.double(), want)

        # all_gather_into_tensor
        for n in (7, 1 << 20):
            x = val(rank, n, torch.float32).to(dev)
            out = torch.empty(world * n, dtype=torch.float32, device=dev)
            dist.all_gather_into_tensor(out, x)
            check(f"all_gather_into_tensor.{n}", out, torch.cat([val(r, n, torch.float32) for r in range(world)]))

        # reduce_scatter_tensor
        for n in (5, 1 << 20):
            x = torch.cat([val(rank, n, torch.float32, scale=c + 1) for c in range(world)]).to(dev)
            out = torch.empty(n, dtype=torch.float32, device=dev)
            dist.reduce_scatter_tensor(out, x)
            want = sum(val(r, n, torch.float64, scale=rank + 1) for r in range(world))
            check(f"reduce_scatter_tensor.{n}", out.double(), want)

        # broadcast from each root
        for root in range(world):
            for n in (3, 1 << 20):
                x = val(rank, n, torch.bfloat16).to(dev)
                dist.broadcast(x, src=root)
                check(f"broadcast.root{root}.{n}", x, val(root, n, torch.bfloat16))

        # all_to_all_single (equal split)
        for n in (4, 1 << 18):
            x = torch.cat([val(rank, n, torch.float32, scale=10 * (p + 1)) for p in range(world)]).to(dev)
            out = torch.empty(world * n, dtype=torch.float32, device=dev)
            dist.all_to_all_single(out, x)
            want = torch.cat([val(p, n, torch.float32, scale=10 * (rank + 1)) for p in range(world)])
            check(f"all_to_all_single.{n}", out, want)

        # send/recv: blocking pair, then a batch in both directions
        n = 1 << 16
        peer = (rank + 1) % world
        if rank == 0:
            dist.send(val(0, n, torch.float32).to(dev), dst=1)
            got = torch.empty(n, dtype=torch.float32, device=dev)
            dist.recv(got, src=1)
            check("send_recv.blocking", got, val(1, n, torch.float32))
        elif rank == 1:
            got = torch.empty(n, dtype=torch.float32, device=dev)
            dist.recv(got, src=0)
            check("send_recv.blocking", got, val(0, n, torch.float32))
            dist.send(val(1, n, torch.float32).to(dev), dst=0)
        got = torch.empty(n, dtype=torch.int64, device=dev)
        ops = [dist.P2POp(dist.isend, val(rank, n, torch.int64).to(dev), peer),
               dist.P2POp(dist.irecv, got, (rank - 1) % world)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        check("send_recv.batch", got, val((rank - 1) % world, n, torch.int64))

        # Three steps of a small DistributedDataParallel model.
        model = make_model(torch).to(dev)
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[gpu])
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(100 + rank)
        steps = []
        reference = host_ddp_reference(torch, world, 3)
        for step in range(3):
            x, y = batch(torch, gen)
            x, y = x.to(dev), y.to(dev)
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
            flat = torch.cat([p.detach().double().flatten() for p in model.parameters()]).cpu()
            steps.append({"loss": loss.item(), "sum": flat.sum().item(), "abs_sum": flat.abs().sum().item(),
                          "first": flat[:4].tolist()})
            # float32 on the GPU against float64 on the host: parameters are O(0.1), the
            # rounding differences after three steps O(1e-6).
            want_losses, want_flat = reference[step]
            check(f"ddp.step{step}.params_match_host", flat, want_flat, 1e-4)
            if abs(loss.item() - want_losses[rank]) > 1e-4 * max(1.0, abs(want_losses[rank])):
                res["checks"][f"ddp.step{step}.loss_matches_host"] = False
                res["errors"].append(f"ddp step {step}: loss {loss.item()!r}, the host's {want_losses[rank]!r}")
            else:
                res["checks"][f"ddp.step{step}.loss_matches_host"] = True
        # Every rank must hold the same parameters after DDP's averaged steps.
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        gathered = torch.empty(world * flat.numel(), dtype=flat.dtype, device=dev)
        dist.all_gather_into_tensor(gathered, flat)
        parts = gathered.view(world, -1)
        check("ddp.replicas_equal", parts[rank], parts[0])
        res["ddp"] = steps
        torch.cuda.synchronize()
        dist.barrier()
        dist.destroy_process_group()
    except Exception:
        res["errors"].append(traceback.format_exc())
        res["checks"]["no_exception"] = False
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f, indent=1)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    out_path = sys.argv[1]
    expect = sys.argv[2] if len(sys.argv) > 2 else ""
    import tempfile
    import torch
    import torch.multiprocessing as mp

    world = 2
    ngpu = torch.cuda.device_count()
    if ngpu < 1:
        print("torch_check: no GPU; skipped")
        return 77
    shared = ngpu < world
    if shared and expect == "--expect-nccl":
        print(f"torch_check: {world} ranks would share {ngpu} GPU, which NCCL refuses (duplicate GPU); skipped")
        return 77
    tmp = tempfile.mkdtemp(prefix="weft-torch-")
    port = 29500 + os.getpid() % 1000
    mp.spawn(worker, args=(world, tmp, port), nprocs=world, join=True)
    ranks = []
    for r in range(world):
        p = os.path.join(tmp, f"rank{r}.json")
        ranks.append(json.load(open(p)) if os.path.exists(p) else {"rank": r, "checks": {"wrote_result": False},
                                                                        "errors": ["no result file"]})
    ok = all(bool(r["checks"]) and all(r["checks"].values()) for r in ranks)
    libs = sorted({lib for r in ranks for lib in r.get("libraries", [])})
    import nccl_which
    answered = []
    expectation_failed = False
    for r in ranks:
        found = r.get("answering") or []
        if not found:
            ok = False
            r["errors"].append("which library answered NCCL calls is unknown (the rank did not get that far)")
        for info in found:
            answered.append(f"{info['symbol']}: {info['real_path']} ({info['version']})")
            why = nccl_which.verdict(info, expect)
            if why:
                ok = False
                expectation_failed = True
                r["errors"].append(why)
    answered = sorted(set(answered))
    version = sorted({i["version"] for r in ranks for i in r.get("answering", []) if i["symbol"] == "ncclGetVersion"},
                     key=str)
    summary = {"ok": ok, "expect": expect, "gpus": ngpu, "shared_gpu": shared, "answered_by": answered, "runtime_nccl_version": version,
               "torch_built_with_nccl": ranks[0].get("torch_built_with_nccl"), "libraries": libs, "ranks": ranks}
    with open(out_path, "w") as f:
        json.dump(summary, f, indent=1)
    n = sum(len(r["checks"]) for r in ranks)
    bad = [f"rank {r['rank']}: {k}" for r in ranks for k, v in r["checks"].items() if not v]
    where = f"{world} ranks sharing {ngpu} GPU (correctness only)" if shared else f"{world} ranks"
    print(f"torch_check: {n - len(bad)} of {n} checks passed on {where}; libtorch_cuda's NCCL calls "
          f"answered by {answered or 'unknown'}"
          + (f"; {expect}: {'NOT MET' if expectation_failed else 'met'}" if expect else "") + f"; mapped {libs}")
    for b in bad[:20]:
        print("  FAIL", b)
    for r in ranks:
        for e in r["errors"][:5]:
            print(f"  rank {r['rank']}: {e}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
