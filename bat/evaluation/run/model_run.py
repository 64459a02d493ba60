"""One model of a run: start the agent with the model's settings, run its episodes, stop it.

Each model is evaluated on its own: whatever happens to one (its agent does not start,
dies more often than ``max_restarts`` allows) is recorded for that model, and the run
goes on with the next. What happened is returned as a ``ModelRecord`` for ``run.json``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bat import secrets
from bat.agent_python import AgentPython
from bat.errors import InputError
from bat.evaluation.cost import AGENT_DEFAULT, PriceBook, episode_cost
from bat.evaluation.inputs.agent_settings import AgentSettings, write_config_copy
from bat.evaluation.inputs.config import ModelSpec, ResolvedConfig
from bat.evaluation.inputs.dataset import Dataset
from bat.evaluation.log import layout, store
from bat.evaluation.log.card import note_agent_card
from bat.evaluation.log.episode import EpisodeCost, EpisodeResult
from bat.evaluation.log.run import ModelEntry
from bat.evaluation.run.adapter import preload
from bat.evaluation.run.agent_card import card_answers
from bat.evaluation.run.agent_container import engine_is_local
from bat.evaluation.run.agent_process import AgentProcess, shown_command, tail
from bat.evaluation.run.agent_runtime import note_runtime
from bat.evaluation.run.budget import CostBudget
from bat.evaluation.run.progress import Progress
from bat.evaluation.run.runner import (
    CredentialWatch,
    EpisodeRunner,
    RestartBudget,
    plan,
    run_on_a_loop,
    spread,
)
from bat.evaluation.run.spans import SpanIndex
from bat.figures import seconds
from bat.secrets import Scrubber

Say = Callable[[str], None]


# A model's entry in run.json, filled in as its part of the run goes.
ModelRecord = ModelEntry


def model_record(
    resolved: ResolvedConfig, model: ModelSpec | None, settings: AgentSettings | None = None
) -> ModelRecord:
    from bat.evaluation.inputs.model_keys import key_env_of

    return ModelRecord(
        label=resolved.model_label(model),
        dir=resolved.model_dir(model),
        provider=model.provider if model else None,
        model=model.model if model else None,
        key_env=key_env_of(resolved, model, settings),
    )


def run_model(
    resolved: ResolvedConfig,
    dataset: Dataset,
    settings: AgentSettings | None,
    run_dir: Path,
    model: ModelSpec | None,
    record: ModelRecord,
    *,
    retry_infra: bool = False,
    chosen: Callable[[Any, int], bool] | None = None,
    say: Say = print,
    scrubber: Scrubber,
    infra: store.InfraCache | None = None,
    python: AgentPython | None = None,
    prices: PriceBook | None = None,
    budget: CostBudget | None = None,
) -> None:
    """Run the model's missing episodes (and, with ``retry_infra``, its infrastructure
    failures; with ``chosen``, only the (task, attempt) it keeps: a shard's slice); fills
    ``record``. A model that cannot be evaluated raises a BatError. ``scrubber`` keeps the
    configuration's secrets out of every file written; ``infra`` is what is known of the
    model folder's infrastructure failures (the run context's); ``prices`` price each
    episode's tokens as it is written (None: episodes without a cost); ``budget`` is the
    run's cost budget (None: none): once it is reached, no episode of the model starts and
    its record says ``stopped``."""
    evaluation = resolved.evaluation
    model_dir = run_dir / record.dir
    retry = store.infra_failures(model_dir, infra) if retry_infra else set()
    work = plan(dataset.tasks, evaluation.k, store.episodes_done(model_dir), retry)
    if chosen is not None:
        work = [item for item in work if chosen(item.task, item.attempt)]
    if not work:
        say(f"[{record.label}] every episode is already there")
        record.status = "completed"
        return
    if budget is not None and budget.closed():  # reached by an earlier model: no agent starts
        budget.left_out(len(work))
        budget.settle(record, budget.not_scheduled - len(work), len(work))
        say(f"[{record.label}] not started: {record.reason}")
        return
    model_dir.mkdir(parents=True, exist_ok=True)
    pricing = None
    if prices is not None:
        payer, user = model or AGENT_DEFAULT, resolved.config.user

        def pricing(episode: EpisodeResult) -> EpisodeCost:
            return episode_cost(prices, episode, payer, user)

    with scripted_model(resolved, model, record, say) as model:
        if evaluation.agent.adapter != "a2a":
            from bat.evaluation.run.cli_run import run_cli_work

            run_cli_work(
                resolved, dataset, model_dir, model, record, work, say, scrubber, pricing, budget
            )
            return
        from bat.evaluation.run.simulated_user import user_model

        simulated = any(item.task.user is not None for item in work)
        with user_model(resolved, simulated, say) as users:
            _run_work(
                resolved, settings, run_dir, model, record, work, say, scrubber, python, users,
                pricing, budget,
            )  # fmt: skip


@contextlib.contextmanager
def scripted_model(
    resolved: ResolvedConfig, model: ModelSpec | None, record: ModelRecord, say: Say
) -> Iterator[ModelSpec | None]:
    """``model``, or with a ``script``, the model served by bat for the block: the same
    entry pointed at the scripted model (BASE_URL, and a placeholder key for an OpenAI or
    Anthropic client, which refuses to start without one)."""
    if model is None or model.script is None:
        yield model
        return
    if resolved.evaluation.agent.image is not None and not engine_is_local():
        # Containers share the host's network (agent_container), so a local engine's
        # agents reach 127.0.0.1; a remote engine's host is another machine.
        raise InputError(
            f"{resolved.file}: models: {record.label}: a script is served on 127.0.0.1, "
            "out of reach of a remote Docker engine's containers"
        )
    from bat.evaluation.run.scripted_model import serving

    with serving(resolved.base / model.script, avoid={resolved.agent_port}) as address:
        base_url = f"{address}/v1" if model.provider == "openai" else address
        # A client refuses to start without its key; an Anthropic client adds /v1 itself.
        keys = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
        key = (
            {keys[model.provider]: "scripted-model-needs-no-key"} if model.provider in keys else {}
        )
        say(f"[{record.label}] scripted model from {model.script} at {base_url}")
        yield model.model_copy(update={"base_url": base_url, "env": {**key, **model.env}})


def _run_work(
    resolved, settings, run_dir, model, record, work, say, scrubber, python, users=None,
    pricing=None, cost_budget=None,
) -> None:  # fmt: skip
    """Start the agent(s) of ``model``, run ``work`` against them, stop them; ``users``
    plays the tasks' simulated users (``simulated_user.UserModel``), if any; ``pricing``
    gives each episode its cost; ``cost_budget`` (run.budget) may stop it part-way."""
    evaluation = resolved.evaluation
    model_dir = run_dir / record.dir
    agents: list = []
    urls = [resolved.agent_url]
    spans_file: Path | None = evaluation.agent.spans_file
    expected = spans_file is not None
    image = evaluation.agent.image
    if evaluation.agent.start:
        # Spans are read only when the agent has a config file to send them to our file
        # (and, for containers, only when the engine can mount the run folder).
        readable = settings.config_path and (image is None or engine_is_local())
        spans_file = layout.spans_file(model_dir) if readable else None
        expected = spans_file is not None and settings.writes_spans
        if image is None:
            log = agent_log(run_dir, record)
            agents = [_agent_process(resolved, settings, model, model_dir, log, spans_file, python)]
        else:
            agents = _replicas(resolved, settings, model, run_dir, record, spans_file, say)
            urls = [agent.url for agent in agents]
    elif not card_answers(resolved.agent_url):
        raise InputError(
            f"no agent answers at {resolved.agent_url} (at /.well-known/agent-card.json or "
            "/.well-known/agent.json; evaluation.agent.start is false)"
        )
    # The spans of agents it calls (extra_spans) join the conversations of its own file.
    spans = SpanIndex(spans_file, resolved.extra_spans, expected=expected) if spans_file else None
    try:
        if agents:
            what = (
                f"{image} ×{len(agents)}"
                if image
                else f"{shown_command(evaluation.agent.command)} (in {resolved.root})"
            )
            say(f"[{record.label}] starting the agent: {what}")
        for agent in agents:
            agent.start()
            if agent.stale_stopped is not None:
                say(
                    f"[{record.label}] stopped the agent an earlier bat left running "
                    f"(pid {agent.stale_stopped})"
                )
        threading.Thread(target=preload, name="bat-preload", daemon=True).start()
        for agent in agents:
            took = agent.wait_ready()
            say(f"[{record.label}] agent ready at {agent.url} after {seconds(took)}")
        if agents:
            note_runtime(run_dir, resolved, scrubber)
        progress = Progress(record.label, len(work))
        quiet = cost_budget.say if cost_budget is not None else None
        if cost_budget is not None:  # its line is said above the live progress line
            cost_budget.say = progress.notice(say)
        budget = RestartBudget(evaluation.agent.max_restarts)
        credentials = CredentialWatch()  # a missing key stops the model early
        runners = [
            EpisodeRunner(
                url,
                model=record.label,
                shown_url=secrets.display_url(url),
                model_dir=model_dir,
                concurrency=share,
                turn_timeout_s=evaluation.turn_timeout_s,
                spans=spans,
                agent=agents[n] if agents else None,
                budget=budget,
                credentials=credentials,
                key_env=record.key_env,
                on_done=progress.update,
                notice=progress.notice(say),
                scrubber=scrubber,
                warm_latency=evaluation.warm_latency,
                user_model=users,
                pricing=pricing,
                cost_budget=cost_budget,
            )
            for n, (url, share) in enumerate(
                zip(urls, shares(evaluation.concurrency, len(urls)), strict=True)
            )
        ]
        if len(runners) > 1:
            for n, runner in enumerate(runners, 1):
                runner.name = f"replica {n}"
        before = cost_budget.not_scheduled if cost_budget is not None else 0
        try:
            run_on_a_loop(
                lambda: spread(runners, work) if len(runners) > 1 else runners[0].run(work)
            )
            # The episodes' connections (transports and protocols refer to each other) are
            # freed now. Left to the cyclic collector, a transport's __del__ ran at some
            # moment of a later stage, and a Ctrl-C landing in it was printed as "Exception
            # ignored" and lost.
            gc.collect()
        except BaseException:
            progress.abandon()
            raise
        finally:
            if cost_budget is not None:
                cost_budget.say = quiet
            # The binding spoken now wins over one recorded before (--resume).
            record.binding = next((r.binding for r in runners if r.binding), record.binding)
            for runner in runners:
                record.restarts += runner.restarts
                record.requests_resent += runner.requests_resent
                note_agent_card(run_dir, runner.agent_card, scrubber=scrubber)
        progress.finish()
        if cost_budget is not None:
            cost_budget.settle(record, before, len(work))
        else:
            record.episodes_run += len(work)
            record.status = "completed"
        record.spans = _spans_word(spans)
        record.span_waits += spans.waits if spans is not None else 0
    finally:
        for agent in agents:
            agent.close()


def shares(concurrency: int, replicas: int) -> list[int]:
    """``concurrency`` split over ``replicas`` as evenly as whole numbers allow."""
    return [concurrency // replicas + (n < concurrency % replicas) for n in range(replicas)]


def agent_log(run_dir: Path, record: ModelRecord, replica: int | None = None) -> Path:
    """Where the output of the model's agent goes (of one replica, when there are several)."""
    if replica is not None:
        return layout.replica_agent_log(run_dir, record.dir, replica)
    return layout.agent_log(run_dir, record.dir)


def failed(record: ModelRecord, reason: str, log: Path | None) -> None:
    """Mark ``record`` as a model that could not be evaluated, with the end of its log."""
    record.status = "failed"
    record.reason = reason
    record.log_tail = tail(log) if log is not None and log.is_file() else []


def _spans_word(spans: SpanIndex | None) -> str:
    if spans is None:
        return "none"
    if spans.silent:
        return "silent"  # expected, but the agent wrote none
    return "expected" if spans.expected else "not expected"


def _settings_env(resolved, settings, model, model_dir, spans_file) -> dict[str, str]:
    """What bat sets for the agent, over its own files: ``evaluation.agent.env``, the
    model's settings, and the config copy that sends its spans into the run folder."""
    env = dict(resolved.evaluation.agent.env)
    if model is not None:
        env.update(MODEL=model.model, MODEL_PROVIDER=model.provider)
        if model.base_url:
            env["BASE_URL"] = model.base_url
        env.update(model.env)
    if settings is not None and spans_file is not None:
        copy = write_config_copy(
            settings, layout.agent_config_copy(model_dir), spans_file.resolve()
        )
        if copy is not None:
            env["CONFIG_PATH"] = str(copy.resolve())
    return env


def _replicas(resolved, settings, model, run_dir, record, spans_file, say) -> list:
    """The containers of ``evaluation.agent.image`` for this model, not started yet."""
    from bat.evaluation.run.agent_container import (
        LABEL,
        ContainerAgent,
        container_env,
        engine_host_name,
        find_image,
        remove_left_behind,
        replica_port,
    )
    from bat.images.engine import connect

    agent = resolved.evaluation.agent
    model_dir = run_dir / record.dir
    client = connect()
    record.image = find_image(client, agent.image, say)
    left = remove_left_behind(client, run_dir.resolve(), record.dir)
    if left:
        say(f"[{record.label}] removed {len(left)} container(s) an earlier bat left running")
    overrides = _settings_env(resolved, settings, model, model_dir, spans_file)
    dotenv = resolved.dotenv
    host, local = engine_host_name(), engine_is_local()
    mounts = [model_dir.resolve()] if spans_file is not None else []
    # bat's user, so the agent reads the private config copy (agent_container's doc)
    user = f"{os.getuid()}:{os.getgid()}" if mounts and hasattr(os, "getuid") else None
    replicas = []
    for n in range(1, agent.replicas + 1):
        port = replica_port(resolved.agent_port, n, local=local)
        log = agent_log(run_dir, record, n if agent.replicas > 1 else None)
        labels = {
            LABEL: str(run_dir.resolve()),
            f"{LABEL}.model": record.dir,
            f"{LABEL}.replica": str(n),
        }
        replicas.append(
            ContainerAgent(
                client,
                agent.image,
                env=container_env(dotenv, dict(os.environ), {**overrides, "PORT": str(port)}),
                log=log,
                url=f"http://{host}:{port}",
                labels=labels,
                mounts=mounts,
                user=user,
                startup_timeout_s=resolved.evaluation.agent_startup_timeout_s,
                shutdown_timeout_s=resolved.evaluation.agent_shutdown_timeout_s,
            )
        )
    record.replicas = agent.replicas
    return replicas


def _agent_process(resolved, settings, model, model_dir, log, spans_file, python) -> AgentProcess:
    env = {
        **resolved.environment,
        **(python.env if python is not None else {}),  # eval.yaml's own settings win
        **_settings_env(resolved, settings, model, model_dir, spans_file),
    }
    env["PORT"] = str(resolved.agent_port)  # where bat waits for it, whatever else says
    return AgentProcess(
        resolved.evaluation.agent.command,
        root=resolved.root,
        env=env,
        log=log,
        url=resolved.agent_url,
        startup_timeout_s=resolved.evaluation.agent_startup_timeout_s,
        shutdown_timeout_s=resolved.evaluation.agent_shutdown_timeout_s,
        record=layout.agent_process_record(log),
    )
