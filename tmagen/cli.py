"""The `tmagen` command: parses arguments, calls the library, prints, and returns a status.

Exit statuses: 0 success; 1 a check that found a difference (`build --check`, a failed
verification); 2 bad input (unreadable or malformed spec, a broken rule, bad arguments);
3 no GPU to run on (`verify`), or a CUDA driver call that failed; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from tmagen import __version__
from tmagen.errors import SpecError, TmagenError

if TYPE_CHECKING:
    from tmagen.plan import Plan

EXIT_OK, EXIT_DIFFERS, EXIT_BAD_INPUT, EXIT_NO_GPU = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 as well; keep its usage line
        self.print_usage(sys.stderr)
        raise SystemExit(f"{self.prog}: error: {message}")


def _int_list(text: str) -> list[int]:
    try:
        return [int(x, 0) for x in text.replace("[", "").replace("]", "").replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of integers (write 64,64 or '64 64')") from None


def _int_or_name(text: str) -> int | str:
    try:
        return int(text, 0)
    except ValueError:
        return text


@functools.lru_cache(maxsize=1)  # built once: parsing reuses it (thousands of calls in the tests)
def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tmagen", description="Validated TMA and swizzle code generation for Hopper and Blackwell.")
    p.add_argument("--version", action="version", version=f"tmagen {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("check", help="validate a spec against every hardware and driver rule")
    c.add_argument("spec", nargs="+", help="spec files, or - for standard input")
    _format_option(c)

    b = sub.add_parser("build", help="render specs into folders of CUDA code (and compile them)")
    b.add_argument("spec", nargs="+")
    b.add_argument("--out", default="generated", help="output root; each spec writes OUT/<name>/ (default: generated)")
    b.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if OUT differs from what the specs render")
    b.add_argument("--compile", action="store_true", help="also compile with nvcc: cubin, PTX, shared library, report")
    b.add_argument("--force", action="store_true", help="replace OUT/<name>/ even where it holds files that no "
                   "build wrote (they are deleted); without it such a folder is refused")

    v = sub.add_parser("verify", help="compile and run each spec's kernel on the GPU, checked bit for bit")
    v.add_argument("spec", nargs="+")
    v.add_argument("--seed", type=int, default=None, help="seed of the random inputs (default: fresh)")
    _format_option(v)

    bn = sub.add_parser("bench", help="time a spec's kernel against cudaMemcpy on the GPU",
                        description="On a GPU: the kernel of each spec on its shape (1 GiB and more is meaningful) "
                        "against cudaMemcpyAsync of the same bytes, median of --runs. BENCHMARKS.md is written by "
                        "`python -m lab.bench_report` (in the repository, not the package) from the JSON that "
                        "benchmarks/run.py wrote.")
    bn.add_argument("spec", nargs="+")
    bn.add_argument("--runs", type=int, default=20)

    s = sub.add_parser("schema", help="print the JSON Schema of specs")
    s.add_argument("--output", "-o", help="write to this file instead of standard output")

    d = sub.add_parser("diagnose", help="say why cuTensorMapEncodeTiled refuses these arguments",
                       description="Arguments in the driver's order (innermost first). Give them as flags, as "
                       "a JSON object with the same names (snake_case, or the driver's camelCase: globalDim, "
                       "boxDim, ...), or paste the dump CUTLASS/CuTe, FlashAttention-3 or flashinfer printed "
                       "when the encode failed; in a file, or '-' for standard input. Errors are what the driver "
                       "refuses; warnings, what it encodes and a kernel cannot use.")
    d.add_argument("json", nargs="?", help="a file of the arguments (JSON or a pasted dump), or - for standard input")
    d.add_argument("--dtype", type=_int_or_name, help="CUtensorMapDataType: 0-15 or a name (FLOAT32, ...)")
    d.add_argument("--rank", type=int)
    d.add_argument("--global-address", type=lambda x: int(x, 0))
    d.add_argument("--global-dim", type=_int_list)
    d.add_argument("--global-strides", type=_int_list, default=None)
    d.add_argument("--box-dim", type=_int_list)
    d.add_argument("--element-strides", type=_int_list)
    d.add_argument("--interleave", type=_int_or_name, default=0)
    d.add_argument("--swizzle", type=_int_or_name, default=0)
    d.add_argument("--l2-promotion", type=_int_or_name, default=0)
    d.add_argument("--oob-fill", type=_int_or_name, default=0)
    d.add_argument("--arch", default="sm_90a")
    d.add_argument("--result", metavar="CODE", help="the CUresult the call returned (1, CUDA_ERROR_INVALID_VALUE, "
                   "...): says what it means and whether tmagen's findings explain it")
    _format_option(d)

    e = sub.add_parser("explain", help="show a spec's tensor maps and swizzled layout, or the pattern tables",
                       description="With a spec: the cuTensorMapEncodeTiled arguments as the host code passes them, "
                       "footprints, base offsets and the chunk table of each map, and with --svg/--png a drawing "
                       "of the layout and of a warp reading one column. Without: the swizzle pattern tables.")
    e.add_argument("spec", nargs="?")
    e.add_argument("--swizzle", help="one mode (none, 32B, 64B, 128B, 128B_atom_32B, ...); default: all")
    e.add_argument("--base-offset", type=int, default=0, help="the PTX base offset (128-byte lines into the pattern)")
    e.add_argument("--map", help="which tensor map of the spec to draw (default: the first)")
    e.add_argument("--column", type=int, default=0, help="the chunk column the drawn warp reads (default 0)")
    e.add_argument("--svg", metavar="FILE", help="write the drawing as SVG")
    e.add_argument("--png", metavar="FILE", help="write the drawing as PNG (needs matplotlib)")

    o = sub.add_parser("docs", help="write docs/spec.md and docs/rules.md from the schema and the rules")
    o.add_argument("--out", default="docs")
    o.add_argument("--check", action="store_true", help="write nothing; exit 1 if the documents are stale")

    r = sub.add_parser("rules", help="list every rule tmagen checks, with its id and source")
    r.add_argument("--json", action="store_true", help="the list of rules alone as JSON (kept for existing scripts; "
                   "--format json gives it in the object every command prints)")
    _format_option(r)
    return p


def _format_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="json: one JSON object on standard output (docs/json-output.md); exit statuses unchanged")


def _finding(v: Any) -> dict[str, Any]:
    """One broken rule as JSON: the stable shape of docs/json-output.md."""
    return {"rule": v.rule, "severity": v.severity, "field": v.field, "value": v.value, "limit": v.why,
            "fix": v.fix, "source": v.source, "message": v.message}


def _problem(text: str) -> dict[str, Any]:
    """A problem that is no rule's (an unreadable file, a schema error): only its message."""
    return {"rule": None, "severity": "error", "field": None, "value": None, "limit": None, "fix": None,
            "source": None, "message": text}


def _error_findings(exc: TmagenError) -> list[dict[str, Any]]:
    from tmagen.errors import RuleError

    if isinstance(exc, RuleError):
        return [_finding(v) for v in exc.violations]
    if isinstance(exc, SpecError):
        return [_problem(p) for p in exc.problems]
    return [_problem(str(exc))]


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2))


def _cmd_check(args: argparse.Namespace) -> int:
    from tmagen.plan import load

    status = EXIT_OK
    results = []
    for path in args.spec:
        try:
            plan = _stdin_plan() if path == "-" else load(path)
        except TmagenError as exc:
            if args.format == "text":
                print(f"tmagen check: {exc}", file=sys.stderr)
            results.append({"spec": path, "ok": False, "errors": _error_findings(exc), "warnings": []})
            status = max(status, exc.exit_status)
            continue
        spec = plan.spec
        results.append({"spec": path, "ok": True, "name": spec.name, "target": spec.target,
                        "tensors": len(spec.tensors), "kernel": plan.description, "errors": [], "warnings": []})
        if args.format == "text":
            print(f"{path}: {spec.name} is valid for {spec.target} ({len(spec.tensors)} tensor"
                  f"{'s' if len(spec.tensors) != 1 else ''}, {plan.description})")
    if args.format == "json":
        _print_json({"command": "check", "ok": status == EXIT_OK, "errors": [], "warnings": [], "results": results})
    return status


def _stdin_plan() -> Plan:
    from tmagen.plan import resolve
    from tmagen.spec import parse_spec, read_json

    source = "standard input"
    return resolve(parse_spec(read_json(sys.stdin.read(), source), source), source)


def _cmd_build(args: argparse.Namespace) -> int:
    from tmagen import build, toolchain

    if not args.out.strip():
        raise SpecError("build", [f"--out = {args.out!r}, but the output root must name a folder: give one, "
                                  "or leave --out off for generated/"])
    rendered = [build.render_spec_file(path) for path in args.spec]  # every spec valid before any write
    rendered = build.unique_names(rendered, args.spec)
    if args.check:
        stale = [line for r in rendered for line in build.differences(r, args.out)]
        for line in stale:
            print(line)
        print(f"{len(stale)} difference{'s' if len(stale) != 1 else ''} between {args.out}/ and "
              f"{len(rendered)} spec{'s' if len(rendered) != 1 else ''}"
              + (": run tmagen build to update" if stale else ""))
        return EXIT_DIFFERS if stale else EXIT_OK
    status = EXIT_OK
    for r in rendered:
        folder = build.write(r, args.out, force=args.force)
        print(f"{r.spec_file}: wrote {folder} ({len(r.files)} files)")
        if args.compile:
            result = toolchain.compile_folder(r.plan, r.files)
            print(f"  compiled{' (cached)' if result.cached else ''}: {result.cubin}, {result.ptx}, "
                  f"{result.shared_library}")
            for k in result.kernels:
                print(f"  {k.name}: {k.registers} registers, {k.shared_bytes} bytes static shared memory, "
                      f"{k.stack_frame_bytes} bytes stack, {k.spill_store_bytes}/{k.spill_load_bytes} bytes spilled")
            sass = toolchain.sass_check(r.plan, result)
            if sass is None:
                print("  SASS not checked: no cuobjdump here (pip install 'tmagen[toolchain]' brings it)")
            elif not sass:
                print("  no kernel: the device header and the encode API compiled, no SASS to check")
            for symbol, seen in (sass or {}).items():
                print(f"  SASS of {symbol}: " + ", ".join(f"{op} {'present' if present else 'ABSENT'}"
                                                          for op, present in seen.items()))
            for planned in r.plan.every_kernel:
                budget = planned.registers
                if budget is not None:
                    print(f"  registers of {planned.symbol}: {budget.least}"
                          + ("" if budget.most == budget.least else f" to {budget.most}")
                          + f" per thread for its setmaxnreg split ({budget.split})")
            problems = (toolchain.spill_violations(r.plan, result) + toolchain.register_violations(r.plan, result)
                        + toolchain.sass_violations(r.plan, result) + toolchain.wgmma_violations(result))
            for line in problems:
                print(f"  error: {line}", file=sys.stderr)
            if problems:
                status = EXIT_DIFFERS
    return status


def _gpu_here(command: str) -> bool:
    """True where kernels can run; otherwise says why, in one line."""
    from tmagen import runtime

    reason = runtime.no_gpu_reason()
    if reason:
        print(f"tmagen {command}: nothing run, {reason}", file=sys.stderr)
    return reason is None


def _cmd_verify(args: argparse.Namespace) -> int:
    from tmagen import build, runtime, toolchain, verify

    rendered = [build.render_spec_file(path) for path in args.spec]  # a bad spec is bad input, GPU or not
    if not _gpu_here("verify"):
        if args.format == "json":
            _print_json({"command": "verify", "ok": False, "device": None, "warnings": [], "results": [],
                         "errors": [_problem(f"nothing run, {runtime.no_gpu_reason()}")]})
        return EXIT_NO_GPU
    device = runtime.Device.open()
    heading = (f"{device.name} (sm_{device.compute_capability[0]}{device.compute_capability[1]}), "
               f"driver {device.driver_version // 1000}.{device.driver_version % 1000 // 10}")
    if args.format == "text":
        print(heading)
    rows: list[tuple[str, ...]] = []
    results: list[dict[str, Any]] = []
    failed = False
    for r in rendered:
        if not r.plan.runs_here:
            rows.append((r.spec.name, "-", "-", f"skipped: {r.spec.target} cannot run on this GPU", "-"))
            results.append({"spec": r.spec_file, "kernel": r.spec.name, "shape": None, "dtype": None,
                            "result": "skipped", "detail": f"{r.spec.target} cannot run on this GPU", "ms": None})
            continue
        plan, files = verify.proof(r.plan, r.files, r.spec_file)
        result = toolchain.compile_folder(plan, files)
        checker = verify.Verifier(plan, result.cubin.read_bytes(), device, seed=args.seed)
        whose = "" if r.plan.has_kernel else " (tmagen's, the spec has no kernel)"
        try:
            for o in checker.run_all():
                failed |= not o.ok
                rows.append((o.kernel + whose, "x".join(map(str, o.shape)), o.dtype, f"{o.result}: {o.detail}",
                             f"{o.ms:.3f} ms" if o.ms is not None else "-"))
                results.append({"spec": r.spec_file, "kernel": o.kernel + whose, "shape": list(o.shape),
                                "dtype": o.dtype, "result": o.result, "ok": o.ok, "detail": o.detail, "ms": o.ms})
        finally:
            checker.close()
    if args.format == "json":
        _print_json({"command": "verify", "ok": not failed, "device": heading, "errors": [], "warnings": [],
                     "results": results})
        return EXIT_DIFFERS if failed else EXIT_OK
    header = ("kernel", "shape", "dtype", "result", "time")
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    return EXIT_DIFFERS if failed else EXIT_OK


def _cmd_bench(args: argparse.Namespace) -> int:
    from tmagen import bench, build, runtime, toolchain

    rendered = [build.render_spec_file(path) for path in args.spec]  # a bad spec is bad input, GPU or not
    if not _gpu_here("bench"):
        return EXIT_NO_GPU
    device = runtime.Device.open()
    for r in rendered:
        result = toolchain.compile_folder(r.plan, r.files, cubin_only=True)
        shape = r.spec.tensors[0].shape
        t = bench.kernel_timing(r.plan, result.cubin.read_bytes(), device, shape, args.runs)
        limit = bench.memcpy_timing(t.bytes_moved // 2, args.runs)
        print(f"{t.name}: {'x'.join(map(str, shape))} {t.dtype}: {t.median_ms:.3f} ms, {t.gbps:.0f} GB/s = "
              f"{t.gbps / limit.gbps:.3f} of cudaMemcpyAsync ({limit.gbps:.0f} GB/s)")
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    from tmagen.spec import schema

    text = json.dumps(schema(), indent=2) + "\n"
    if args.output:
        _write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _cmd_diagnose(args: argparse.Namespace) -> int:
    from tmagen import pasted
    from tmagen.rules import diagnose_encode_tiled
    from tmagen.spec import read_json

    dump = False
    if args.json:
        source = "standard input" if args.json == "-" else args.json
        text = sys.stdin.read() if args.json == "-" else _read_text(args.json)
        dump = pasted.looks_like_a_dump(text)
        if dump:
            given = pasted.from_dump(text, source)
        else:
            data = read_json(text, source)
            if not isinstance(data, dict):
                raise SpecError(source, ["expected a JSON object of the arguments, or a pasted descriptor dump"])
            given = pasted.from_mapping(data, source)
        values = {**pasted.DEFAULTS, **given.values}
        missing = [k for k in pasted.ARGUMENTS if values.get(k) is None]
        if missing:
            raise SpecError(source, [f"{k} is missing" for k in missing])
    else:
        values = {k: getattr(args, k) for k in pasted.ARGUMENTS}
        if values["rank"] is not None and values["rank"] == 1 and values["global_strides"] is None:
            values["global_strides"] = []
        given = pasted.Pasted(values)
    missing = [k for k in pasted.ARGUMENTS if values.get(k) is None]
    if missing:
        raise SpecError("diagnose", [f"--{k.replace('_', '-')} is missing" for k in missing])
    stated = args.result if args.result is not None else given.result
    result = pasted.parse_result(stated, "--result" if args.result is not None else "result") \
        if stated is not None else None
    found = diagnose_encode_tiled(**values)
    verdict = _result_verdict(result, found) if result else None
    if args.format == "json":
        _print_json({"command": "diagnose", "ok": not found.errors,
                     "arguments": {pasted.DRIVER_NAMES[k]: values[k] for k in pasted.ARGUMENTS},
                     "notes": given.notes, "errors": [_finding(v) for v in found.errors],
                     "warnings": [_finding(v) for v in found.warnings],
                     "result": None if result is None else {"code": result.code, "name": result.name,
                                                             "meaning": result.meaning, "verdict": verdict}})
        return EXIT_BAD_INPUT if found.errors else EXIT_OK
    if dump:
        print("read: " + ", ".join(f"{pasted.DRIVER_NAMES[k]} = {_shown(k, values[k])}" for k in pasted.ARGUMENTS))
    for note in given.notes:
        print(f"  note: {note}")
    if found.errors:
        print(f"cuTensorMapEncodeTiled would refuse these arguments ({len(found.errors)} problem"
              f"{'s' if len(found.errors) != 1 else ''}):")
        for i, v in enumerate(found.errors, 1):
            print(f"  {i}. {v}")
    else:
        print("valid: tmagen finds no reason for cuTensorMapEncodeTiled to refuse these arguments")
    if found.warnings:
        print(f"warnings: the driver encodes these arguments, but a kernel using the map cannot run as they are "
              f"({len(found.warnings)}):")
        for i, v in enumerate(found.warnings, 1):
            print(f"  {i}. {v}")
    if result:
        print(f"result {result.name} ({result.code}): {result.meaning}; {verdict}")
    return EXIT_BAD_INPUT if found.errors else EXIT_OK


def _shown(key: str, value: object) -> str:
    return hex(value) if key == "global_address" and isinstance(value, int) and value >= 4096 else str(value)


def _result_verdict(result: Any, found: Any) -> str:
    """Whether tmagen's findings explain the CUresult the call returned."""
    if result.refusal:
        if found.errors:
            return "the errors above explain it"
        return ("tmagen finds no rule the driver enforces broken, so it cannot explain the refusal: check that these "
                "are the arguments the call received; if they are, please report them (a rule tmagen does not know)")
    if result.code == 0:
        if found.errors:
            return "but tmagen reports errors for arguments the driver encoded: please report them (a rule wrong)"
        return ("as tmagen expects" + (": the warnings say what a kernel using the map meets" if found.warnings
                                       else ""))
    return ("the arguments do not cause it" + (", though the errors above would refuse them next" if found.errors
                                               else ""))


def _cmd_explain(args: argparse.Namespace) -> int:
    from tmagen import explain

    if args.spec is None:
        if args.svg or args.png:
            raise SpecError("explain", ["--svg and --png draw a spec's box: give the spec"])
        print(explain.pattern_table(args.swizzle, args.base_offset) if args.swizzle else explain.all_pattern_tables())
        return EXIT_OK
    from tmagen.plan import load

    plan = load(args.spec)
    print(explain.explain_plan(plan))
    if args.svg or args.png:
        maps = {m.role: m for m in plan.maps}
        m = maps.get(args.map) if args.map else next(iter(maps.values()))
        if m is None:
            raise SpecError(args.spec, [f"--map {args.map} is not a map of this spec; its maps: {', '.join(maps)}"])
        t = m.tensor
        chunks = t.box[-1] * t.dt.nbytes // 16
        if not 0 <= args.column < chunks:
            raise SpecError(args.spec, [f"--column {args.column} is outside the box: use 0 to {chunks - 1}"])
        drawing = (t.box, t.dt.nbytes, t.swizzle.driver, t.smem_offset, args.column)
        if args.svg:
            _write_text(args.svg, explain.layout_svg(*drawing))
            print(f"wrote {args.svg}")
        if args.png:
            try:
                explain.layout_png(args.png, *drawing)
            except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
                raise SpecError(args.png, [f"cannot write it: {_reason(exc)}"]) from None
            print(f"wrote {args.png}")
    return EXIT_OK


def _reason(exc: Exception) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, ValueError) as exc:  # ValueError: undecodable bytes, or a NUL in the path
        raise SpecError(path, [f"cannot read it: {_reason(exc)}"]) from None


def _write_text(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise SpecError(path, [f"cannot write it: {_reason(exc)}"]) from None


def _cmd_docs(args: argparse.Namespace) -> int:
    from tmagen import docs

    if args.check:
        stale = docs.stale(args.out)
        for path in stale:
            print(f"{path}: stale (run tmagen docs)")
        return EXIT_DIFFERS if stale else EXIT_OK
    for written in docs.write(args.out):
        print(f"wrote {written}")
    return EXIT_OK


def _cmd_rules(args: argparse.Namespace) -> int:
    from tmagen import kinds
    from tmagen.rules import RULES
    from tmagen.toolbox import CLUSTER_RULES

    if args.json or args.format == "json":
        from tmagen.rules import SPEC_ONLY_RULES

        listed = [{"id": r.id, "summary": r.summary, "source": r.source, "documented": r.documented,
                      "driver": "spec only" if r.id in SPEC_ONLY_RULES else
                      "refuses" if r.driver_refuses else "encodes",
                      "driver_measured": r.driver_measured,
                      "diagnose_severity": None if r.id in SPEC_ONLY_RULES else r.encode_severity}
                  for r in RULES.values()]
        by_kind = [{"kind": kind.name, "id": k.id, "summary": k.summary, "source": k.source}
                   for kind in kinds.all_kinds() for k in kind.rules.rules]
        cluster = [{"id": c.id, "summary": c.summary, "source": c.source} for c in CLUSTER_RULES.values()]
        _print_json(listed if args.json else {"command": "rules", "ok": True, "errors": [], "warnings": [],
                                              "rules": listed, "kind_rules": by_kind, "cluster_rules": cluster})
    else:
        for r in RULES.values():
            print(f"{r.id:34} {r.summary}\n{'':34} source: {r.source}")
        for kind in kinds.all_kinds():
            for k in kind.rules.rules:
                print(f"{k.id:34} ({kind.name} kernel) {k.summary}\n{'':34} source: {k.source}")
        for c in CLUSTER_RULES.values():
            print(f"{c.id:34} (cluster launch, multicast) {c.summary}\n{'':34} source: {c.source}")
    return EXIT_OK


COMMANDS = {"build": _cmd_build, "verify": _cmd_verify, "bench": _cmd_bench, "check": _cmd_check, "schema": _cmd_schema,
            "diagnose": _cmd_diagnose, "explain": _cmd_explain, "rules": _cmd_rules, "docs": _cmd_docs}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
            return EXIT_BAD_INPUT
        return EXIT_OK
    try:
        return COMMANDS[args.command](args)
    except TmagenError as exc:
        print(f"tmagen {args.command}: {exc}", file=sys.stderr)
        if getattr(args, "format", "text") == "json":  # a CI job still reads one object
            _print_json({"command": args.command, "ok": False, "errors": _error_findings(exc), "warnings": []})
        return exc.exit_status
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        print(f"tmagen {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def entrypoint() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entrypoint()
