"""croft's experiment harness (docs/experiments.md).

    uv run run.py gpu --dry-run                                   # the plan of the GPU suite
    uv run run.py web --prefix burst-1 --profile burst --scale 0.5 [--scaler croft]
    uv run run.py web --prefix lead --steps 2,4,8,12 --shape ramp
    uv run run.py calibrate                                       # CPU and syscalls per request, here
    uv run run.py compare --prefix hpa- duo-                      # burst runs scored per arm
    uv run run.py simulate --app webapp --profile burst --scale 0.5 --scaler croft --seeds 3
    uv run run.py answer --seeds 10                               # the boundary, simulated: table, CSV, PNG
    uv run run.py answer --real data/web                          # real boundary runs (real.py) beside it
    uv run run.py answer --spec-bursts --seeds 5                  # the spec's two bursts, simulated

Without uv: `python run.py ...` with croft's virtualenv (its dev extras include Locust).
Only one experiment (web, gpu, calibrate) runs at a time: data/experiment.lock.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"


def _profile_options(parser: argparse.ArgumentParser, default: str) -> None:
    import profiles

    parser.add_argument("--profile", default=default, choices=profiles.PROFILES, help="the open-loop profile")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiplies every rate (burst: 10 -> 150 RPS at 1)"
    )
    parser.add_argument(
        "--steps", default="", help="comma-separated RPS levels, e.g. 2,4,8,12 (wins over --profile)"
    )
    parser.add_argument(
        "--shape", default="step", choices=profiles.SHAPES, help="how --steps go from one to the next"
    )
    parser.add_argument("--step-secs", type=float, default=profiles.STEP_S, help="seconds per step")
    parser.add_argument(
        "--duration-secs", type=float, default=None, help="length of constant/ramp/periodic/variable"
    )
    parser.add_argument(
        "--rps", type=float, default=None, help="the constant profile's rate (default 10 x --scale)"
    )
    parser.add_argument(
        "--warmup-secs", type=float, default=profiles.WARMUP_S, help="warm-up before the profile"
    )
    parser.add_argument(
        "--warmup-rps", type=float, default=None, help="warm-up rate (default: the profile's first)"
    )
    parser.add_argument(
        "--ramp-secs",
        type=float,
        default=None,
        help="the burst apps.json sizes the app for (its `burst`), reaching its peak in this many seconds "
        "(0: a step); wins over --profile",
    )
    parser.add_argument("--app", default="webapp", help="an entry of apps.json")
    parser.add_argument("--apps", type=Path, default=HERE / "apps.json", help="the apps file")


def _sim_options(parser: argparse.ArgumentParser) -> None:
    from croft.domain.scaling.sizing import DRAIN_S

    for option, what in (
        ("--pod-start-secs", "the pod start delay, pod created -> containers running"),
        ("--ready-secs", "the Ready delay, containers running -> Ready"),
        ("--controller-delay-secs", "scale-up -> pod created"),
    ):
        parser.add_argument(
            option,
            default=None,
            help=f"{what}: seconds (2.5) or a range low,high (1,3) drawn uniformly; default apps.json's "
            "sim (answer --real: the range measured on the real runs)",
        )
    parser.add_argument(
        "--drain-secs",
        type=float,
        default=DRAIN_S,
        help="croft scale --drain-secs of the simulated croft arm reading the offered load",
    )
    for option, what in (
        ("--cpu-share", "the share of its CPU limit a pod really gets, 0-1 (a loaded node gives less: "
         "req/s one pod served x CPU per request; default 1)"),
        ("--cpu-request-cores", "the pods' CPU request, which the HPA divides by (default: the limit)"),
        ("--scaler-interval-secs", "croft scale's --interval (default 2)"),
        ("--scaler-stabilization-secs", "croft scale's --stabilization-secs (default 300)"),
        ("--max-connection-age-secs", "the server's bound on a keep-alive connection's life, s (0: none; "
         "default apps.json's pod)"),
        ("--hpa-sync-secs", "the HPA controller's sync period (default 15, Kubernetes')"),
        ("--metric-resolution-secs", "metrics-server's resolution (default 15)"),
        ("--hpa-downscale-stabilization-secs", "the HPA's scale-down stabilization (default 300)"),
    ):  # fmt: skip
        parser.add_argument(option, type=float, default=None, help=what)
    parser.add_argument(
        "--connections",
        choices=("per-request", "keep-alive"),
        default="keep-alive",
        help="how requests reach pods: keep-alive (loadgen.py's httpx pool, as the lab's load generator "
        "sends: the oldest idle connection first, a new one pinned to a random Ready pod only when none "
        "is idle, closed after 5 s idle or when its request times out) or per-request (a connection "
        "each, kube-proxy picks a Ready pod per request: the load generator without keep-alive)",
    )
    parser.add_argument(
        "--service",
        choices=("fifo", "shared"),
        default=None,
        help="how a pod serves the requests it holds: fifo (one at a time, in arrival order) or shared "
        "(a thread per connection: new connections wait in the listen queue for the acceptor, the "
        "threads share the CPU limit equally); default apps.json's sim, else fifo",
    )
    parser.add_argument(
        "--record-poll-secs",
        type=float,
        default=1.0,
        help="record each rescale when a harness reading spec.replicas this often sees it, as kube.py's "
        "timeline does (once a second); 0: when it happens",
    )
    parser.add_argument(
        "--accept-cpu-ms",
        type=float,
        default=None,
        help="with --service shared: the share of the pod (CPU ms) its acceptor needs per new "
        "connection (0: accepted at once, pure processor sharing); default apps.json's sim, else 0",
    )


def _seconds(option: str, text: str | None) -> tuple[float, ...] | None:
    """A comma-separated list of seconds (0 or more); None for none given."""
    import apps

    if text is None:
        return None
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        values = ()
    if not values or not all(0 <= v < 1e6 for v in values):
        raise apps.AppError(f"{option} {text!r} is not a comma-separated list of seconds, e.g. 0,30")
    return values


def _delays(args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    import apps

    out = {}
    for option, field in (
        ("--pod-start-secs", "pod_start_s"),
        ("--ready-secs", "readiness_s"),
        ("--controller-delay-secs", "controller_delay_s"),
    ):
        value = getattr(args, option.removeprefix("--").replace("-", "_"))
        if value is not None:
            out[field] = apps.parse_delay(option, value)
    return out


def _tuning(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    import answer
    import apps

    for option in ("cpu_request_cores", "scaler_interval_secs", "hpa_sync_secs", "metric_resolution_secs",
                   "hpa_downscale_stabilization_secs", "drain_secs",
                   "scaler_stabilization_secs"):  # fmt: skip
        value = getattr(args, option)
        if value is not None and not (0 < value < 1e6):
            raise apps.AppError(f"--{option.replace('_', '-')} must be a number above 0")
    if not (0 <= args.record_poll_secs < 1e6):
        raise apps.AppError("--record-poll-secs must be a number of seconds, 0 or more")
    if args.accept_cpu_ms is not None and not (0 <= args.accept_cpu_ms < 1e6):
        raise apps.AppError("--accept-cpu-ms must be a number of milliseconds, 0 or more")
    if args.max_connection_age_secs is not None and not (0 <= args.max_connection_age_secs < 1e6):
        raise apps.AppError("--max-connection-age-secs must be seconds, 0 (no bound) or more")
    if args.cpu_share is not None and not (0 < args.cpu_share <= 1):
        raise apps.AppError("--cpu-share must be a share of the CPU limit above 0 and at most 1, e.g. 0.4")
    return answer.Tuning(
        delays=_delays(args),
        cpu_share=args.cpu_share,
        cpu_request_cores=args.cpu_request_cores,
        drain_s=args.drain_secs,
        scaler_interval_s=args.scaler_interval_secs,
        hpa_sync_s=args.hpa_sync_secs,
        metric_resolution_s=args.metric_resolution_secs,
        hpa_down_stabilization_s=args.hpa_downscale_stabilization_secs,
        connections=args.connections,
        service=args.service,
        accept_cpu_ms=args.accept_cpu_ms,
        record_poll_s=args.record_poll_secs,
        scaler_stabilization_s=args.scaler_stabilization_secs,
        max_connection_age_s=args.max_connection_age_secs,
    )


def _profile(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    import apps
    import profiles

    if args.ramp_secs is not None:
        app = apps.load(args.app, args.apps)
        if app.burst is None:
            raise apps.AppError(f"--ramp-secs needs an app with a burst in {args.apps}; {args.app} has none")
        if not 0 <= args.ramp_secs < 1e6:
            raise profiles.ProfileError("--ramp-secs must be seconds, 0 (a step) or more")
        return app.burst.profile(args.ramp_secs)
    levels = profiles.parse_steps(args.steps) if args.steps else None
    base = profiles.build(
        args.profile, args.scale, levels, args.shape, args.step_secs, args.duration_secs, args.rps
    )
    return profiles.with_warmup(base, args.warmup_secs, args.warmup_rps)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="run.py", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = top.add_subparsers(dest="command", required=True)
    defaults = argparse.ArgumentDefaultsHelpFormatter  # every option's help says its default

    gpu = sub.add_parser(
        "gpu", formatter_class=defaults, help="the GPU suite: one Job per workload, one GPU each"
    )
    gpu.add_argument("--dry-run", action="store_true", help="print the plan instead of running it")
    gpu.add_argument(
        "--manifests",
        action="store_true",
        help="with --dry-run: the plan on stderr, the croft-gpu Namespace and the Jobs as YAML on stdout "
        "(| kubectl apply -f -)",
    )
    gpu.add_argument("--duration-secs", type=int, default=300, help="seconds each workload runs")

    web = sub.add_parser(
        "web", formatter_class=defaults, help="one run of an app under open-loop load or Locust users"
    )
    web.add_argument("--prefix", required=True, help="the run's name starts with it; compare selects by it")
    _profile_options(web, "constant")
    web.add_argument(
        "--scaler",
        default="none",
        choices=("none", "croft"),
        help="none: the HPA alone; croft: croft scale instead of the HPA",
    )
    web.add_argument("--replicas", type=int, default=None, help="fixed replicas, no autoscaler")
    web.add_argument("--probes", default="default", choices=("default", "relaxed"), help="probe timing")
    web.add_argument("--users", type=int, default=None, help="Locust mode: this many closed-loop users")
    web.add_argument("--spawn-rate", type=float, default=5.0, help="Locust users started per second")
    web.add_argument("--host", default=None, help="send the load here instead of apps.json's host")
    web.add_argument("--timeout-secs", type=float, default=10.0, help="a request's timeout")
    web.add_argument("--no-keepalive", action="store_true", help="a new connection per request")
    web.add_argument("--cooldown-secs", type=float, default=15.0, help="seconds recorded after the load")
    web.add_argument(
        "--ready-timeout-secs", type=float, default=300.0, help="seconds to wait for the app to be ready"
    )
    web.add_argument("--prometheus", default=None, help="Prometheus base URL for prometheus.csv")
    web.add_argument("--croft", default="croft", help="the croft executable for --scaler croft")
    web.add_argument("--croft-arg", action="append", default=[], help="an extra croft scale argument")
    web.add_argument(
        "--max-connection-age-secs",
        type=float,
        default=None,
        help="the webapp's bound on a keep-alive connection's life, s (0: none); default apps.json's pod",
    )

    cal = sub.add_parser(
        "calibrate",
        formatter_class=defaults,
        help="CPU and syscalls per request on this machine, from croft's dataset",
    )
    cal.add_argument("--app", default="webapp", help="an entry of apps.json")
    cal.add_argument("--apps", type=Path, default=HERE / "apps.json", help="the apps file")
    cal.add_argument("--rates", default="2,4,8", help="comma-separated RPS to drive it at")
    cal.add_argument("--secs-per-rate", type=float, default=40.0, help="seconds of load at each rate")
    cal.add_argument(
        "--cpu-ms",
        type=float,
        default=None,
        help="the webapp's CPU per request (default the app's pod cpu_ms, else the webapp's own 50)",
    )
    cal.add_argument("--croft", default="croft", help="the croft executable")
    cal.add_argument("--no-write", action="store_true", help="do not write the result into apps.json")

    cmp_ = sub.add_parser("compare", formatter_class=defaults, help="score burst runs per arm")
    cmp_.add_argument("--prefix", nargs="+", required=True, help="one prefix per arm")
    cmp_.add_argument(
        "--slo-ms",
        type=float,
        default=500.0,
        help="the latency objective: a window whose p95 exceeds it violates",
    )

    sim = sub.add_parser(
        "simulate", formatter_class=defaults, help="croft.sim runs in the run-directory format"
    )
    _profile_options(sim, "burst")
    sim.add_argument(
        "--scaler", default="none", choices=("none", "croft", "fixed"), help="none is the HPA alone"
    )
    sim.add_argument("--seeds", type=int, default=3, help="runs per arm, seeds 1..N")
    sim.add_argument(
        "--prefix", default=None, help="default sim-<app>-<arm>- (croft on offered: croft-offered)"
    )
    sim.add_argument(
        "--signal",
        default="sendto",
        choices=("sendto", "offered"),
        help="what the croft arm reads: sendto (replies) or offered (requests reaching each pod, and "
        "its queue)",
    )
    _sim_options(sim)

    ans = sub.add_parser(
        "answer",
        formatter_class=defaults,
        help="the boundary: every arm and the oracle over the burst's shapes, simulated, N seeds each (with "
        "--real, beside real runs); table, boundary.csv and figure. --spec-bursts: the spec's two bursts",
    )
    ans.add_argument("--seeds", type=int, default=10, help="runs per shape, arm and bound, seeds 1..N")
    ans.add_argument("--app", default="webapp-node-200m", help="an entry of apps.json with a burst")
    ans.add_argument("--shapes", default=None, help="seconds to the peak, e.g. 0,30 (default the app's)")
    ans.add_argument(
        "--bounds",
        default=None,
        help="connection age bounds to run, s, e.g. 10,0 (0: none; default the app's and 0)",
    )
    ans.add_argument(
        "--results",
        type=Path,
        default=HERE / "results",
        help="where boundary.csv, boundary.png/.pdf/.svg and boundary.txt go",
    )
    ans.add_argument(
        "--spec-bursts",
        action="store_true",
        help="instead: the spec's bursts (webapp at --scale 0.5, hotel-reservation at 2), HPA and croft, "
        "table + --plot; with --real and --prefix, real runs beside their simulation (versus.py)",
    )
    ans.add_argument(
        "--plot", type=Path, default=None, help="--spec-bursts' figure; default <data>/answer.png"
    )
    ans.add_argument("--apps", type=Path, default=HERE / "apps.json", help="the apps file")
    ans.add_argument(
        "--real",
        type=Path,
        nargs="+",
        default=None,
        help="real run directories, or data directories holding runs.jsonl: report them, labelled "
        "real (node), beside simulated runs of the same offered load, and the simulation's error",
    )
    ans.add_argument(
        "--prefix",
        nargs="+",
        default=None,
        help="with --real: one prefix per arm, the HPA's first (as compare's); for the boundary, the arms "
        "of runs that do not say theirs, in the order hpa, croft-sendto, croft-offered",
    )
    ans.add_argument(
        "--sim-signal",
        action="append",
        default=[],
        help="with --real: PREFIX=offered simulates that croft arm reading the offered load (else sendto)",
    )
    ans.add_argument("--slo-ms", type=float, default=500.0, help="with --real: the latency objective")
    _sim_options(ans)

    for command in (gpu, web, cal, cmp_, sim, ans):
        default = DATA / "sim" if command in (sim, ans) else DATA
        command.add_argument("--data", type=Path, default=default, help="the data directory")
    for command in (gpu, web):
        command.add_argument("--kubectl", default="kubectl", help="the kubectl executable")
        command.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG")
    for command in (gpu, web, cal):
        command.add_argument(
            "--break-stale-lock", action="store_true", help="replace a lock whose owner died"
        )
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    import apps
    import calibrate
    import explock
    import kube
    import locust_mode
    import profiles
    import prom
    import scoring
    import web

    known = (
        profiles.ProfileError,
        apps.AppError,
        explock.LockBusy,
        scoring.CompareError,
        kube.KubeError,
        web.WebError,
        calibrate.CalibrateError,
        locust_mode.LocustError,
        prom.PrometheusError,
    )
    try:
        return _dispatch(args)
    except known as exc:
        print(f"run.py: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("run.py: interrupted", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    import apps
    import explock
    import scoring

    lock = args.data / "experiment.lock"
    if args.command == "gpu":
        import gpu
        import kube

        plan = gpu.suite(args.duration_secs)
        if args.dry_run and args.manifests:
            print(gpu.plan_text(plan), file=sys.stderr)  # stdout is YAML only: pipe it to kubectl apply -f -
            sys.stdout.write(gpu.manifests_yaml(plan))
            return 0
        if args.dry_run:
            print(gpu.plan_text(plan))
            return 0
        with explock.experiment_lock(lock, break_stale=args.break_stale_lock):
            gpu.run_suite(kube.Kubectl(args.kubectl, args.kubeconfig), plan, args.data)
        return 0
    if args.command == "web":
        import web

        options = web.WebOptions(
            app=apps.load(args.app, args.apps),
            prefix=args.prefix,
            profile=_profile(args),
            data_dir=args.data,
            scaler=args.scaler,
            replicas=args.replicas,
            probes=args.probes,
            host=args.host,
            timeout_s=args.timeout_secs,
            keepalive=not args.no_keepalive,
            users=args.users,
            spawn_rate=args.spawn_rate,
            kubectl=args.kubectl,
            kubeconfig=args.kubeconfig,
            croft=args.croft,
            croft_args=tuple(args.croft_arg),
            prometheus=args.prometheus,
            ready_timeout_s=args.ready_timeout_secs,
            cooldown_s=args.cooldown_secs,
            max_connection_age_s=args.max_connection_age_secs,
        )
        with explock.experiment_lock(lock, break_stale=args.break_stale_lock):
            run_dir = web.web(options)
        print(run_dir)
        return 0
    if args.command == "calibrate":
        import datetime as dt
        import json

        import calibrate
        import profiles
        import web

        rates = profiles.parse_steps(args.rates)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        app = apps.load(args.app, args.apps)
        with explock.experiment_lock(lock, break_stale=args.break_stale_lock):
            result = calibrate.calibrate(
                app,
                rates,
                args.secs_per_rate,
                args.data / "calibrate" / stamp,
                web.croft_executable(args.croft),
                args.cpu_ms if args.cpu_ms is not None else (app.pod.cpu_ms if app.pod is not None else None),
                None if args.no_write else args.apps,
            )
        print(json.dumps(result, indent=2))
        return 0
    if args.command == "compare":
        data = args.data / "web"
        scores = scoring.score_prefixes(data, args.prefix, args.slo_ms)
        scoring.write_csv(data / "compare.csv", scores)
        print(scoring.table(scores, args.prefix))
        print(f"{len(scores)} runs scored; rows in {data / 'compare.csv'}")
        return 0
    if args.command == "simulate":
        import answer
        from croft.sim import SimOptions

        tuning = _tuning(args)
        app = tuning.app(apps.load(args.app, args.apps))
        arm = answer.ARM_OF_SCALER[args.scaler]
        offered = arm == "croft" and args.signal == "offered"
        prefix = args.prefix or f"sim-{app.name}-{arm}{'-offered' if offered else ''}-"
        profile = _profile(args)
        template = tuning.options(SimOptions(arm=arm, signal=args.signal))  # type: ignore[arg-type]
        names = answer.simulate_runs(
            app, profile, arm, range(1, args.seeds + 1), prefix, args.data / "web", template
        )
        print(f"{len(names)} simulated runs in {args.data / 'web'}: {', '.join(names)}")
        if profile.burst_s is not None:
            print(scoring.table(scoring.score_prefixes(args.data / "web", [prefix]), [prefix]))
        return 0
    if args.command == "answer" and not args.spec_bursts:
        import boundary_answer

        arms = ("hpa", "croft-sendto", "croft-offered")
        if args.prefix and len(args.prefix) > len(arms):
            raise scoring.CompareError(f"--prefix names at most {len(arms)} arms: {', '.join(arms)}")
        print(
            boundary_answer.answer_text(
                args.app,
                args.apps,
                args.seeds,
                args.data,
                args.results,
                _seconds("--shapes", args.shapes),
                _seconds("--bounds", args.bounds),
                tuple(args.real or ()),
                dict(zip(args.prefix or (), arms, strict=False)),
                _tuning(args),
                args.slo_ms,
            )
        )
        return 0
    if args.command == "answer":
        import answer

        if args.real is not None:
            import versus

            if not args.prefix:
                raise scoring.CompareError("--real needs --prefix: one prefix per arm, the HPA's first")
            print(
                versus.versus(
                    args.real,
                    args.prefix,
                    args.seeds,
                    args.data,
                    args.apps,
                    versus.parse_signals(args.sim_signal),
                    _tuning(args),
                    args.slo_ms,
                )
            )
            return 0
        plot = args.plot or args.data / "answer.png"
        print(answer.answer(args.seeds, args.data, plot, args.apps, _tuning(args)))
        return 0
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
