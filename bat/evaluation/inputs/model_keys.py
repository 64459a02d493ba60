"""Whether each model's agent will hold its provider's API key: warned before the run.

A scaffold pointed at ``openai:gpt-4.1-mini`` without ``OPENAI_API_KEY`` answered every
episode with "Agent execution failed (OpenAIError)"; the words "Missing credentials"
were only in the agent's log. ``eval.run`` (before the first episode), ``--dry-run`` and
``eval.show`` warn alike from here, naming the variable: the one :mod:`bat.provider_keys`
gives for the provider, looked up where the agent will find it (the shell, the agent's
``.env``, ``evaluation.agent.env`` and ``models[].env``). A scripted model needs none
(bat serves it), nor does an agent bat does not start (its environment is not bat's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bat.provider_keys import key_variable, missing_key

if TYPE_CHECKING:
    from bat.evaluation.inputs.agent_settings import AgentSettings
    from bat.evaluation.inputs.config import ModelSpec, ResolvedConfig


def provider_of(
    resolved: ResolvedConfig, model: ModelSpec | None, settings: AgentSettings | None
) -> str | None:
    """The provider ``model`` runs with: its own, or (no ``models:``) the agent's
    ``MODEL_PROVIDER``, else its config file's ``model.provider``."""
    if model is not None:
        return model.provider
    env = resolved.agent_environment
    config: dict[str, Any] = settings.config if settings is not None else {}
    section = config.get("model") if isinstance(config.get("model"), dict) else {}
    provider = env.get("MODEL_PROVIDER") or section.get("provider")
    return provider if isinstance(provider, str) and "$" not in provider else None


def key_env_of(
    resolved: ResolvedConfig, model: ModelSpec | None, settings: AgentSettings | None
) -> str | None:
    """The key variable ``model``'s agent needs (None: none, or a scripted model)."""
    if model is not None and model.script is not None:
        return None
    return key_variable(provider_of(resolved, model, settings))


def key_warnings(resolved: ResolvedConfig, settings: AgentSettings | None) -> list[str]:
    """One warning per model whose provider needs a key its agent will not hold."""
    if not resolved.evaluation.agent.start:
        return []
    warnings = []
    for model in resolved.models:
        if model is not None and model.script is not None:
            continue
        env = {**resolved.agent_environment, **(model.env if model is not None else {})}
        provider = provider_of(resolved, model, settings)
        variable = missing_key(provider, env)
        if variable is None:
            continue
        where = "the shell, the agent's .env, evaluation.agent.env" + (
            " nor models[].env" if model is not None else ""
        )
        warnings.append(
            f"model {resolved.model_label(model)}: provider {provider} needs {variable}, "
            f"which neither {where} sets: its episodes will fail as authentication_failed "
            f"(set {variable}, or give the model a script: to run offline)"
        )
    return warnings
