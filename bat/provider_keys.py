"""Which environment variable holds the API key of each model provider: one table.

``bat doctor`` (a model's key check), ``eval.run`` / ``--dry-run`` / ``eval.show`` (the
warning before the first episode) and the closing line of a run whose episodes failed
on credentials all name the variable from here, so they never disagree. Ollama and
bat's scripted stand-in model (``models[].script``) need no key. Invoke-free and
import-light: doctor and the scaffold read it too.
"""

from __future__ import annotations

from collections.abc import Mapping

# provider (as MODEL_PROVIDER / models[].provider spell it, lower case) -> its key variable;
# None: a provider that needs no key.
KEY_VARIABLES: dict[str, str | None] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GOOGLE_API_KEY",
    "gemini": "GOOGLE_API_KEY",
    "google_genai": "GOOGLE_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "nvidia": "NVIDIA_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "mistralai": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "xai": "XAI_API_KEY",
    "azure": "AZURE_OPENAI_API_KEY",
    "azure_openai": "AZURE_OPENAI_API_KEY",
    "ollama": None,
}


def key_variable(provider: object) -> str | None:
    """The variable ``provider``'s key is read from; None when it needs none or bat does
    not know the provider (nothing to warn about then)."""
    if not isinstance(provider, str):
        return None
    return KEY_VARIABLES.get(provider.strip().lower())


def is_known(provider: object) -> bool:
    return isinstance(provider, str) and provider.strip().lower() in KEY_VARIABLES


def missing_key(provider: object, env: Mapping[str, str]) -> str | None:
    """The key variable ``provider`` needs that ``env`` does not hold (unset or blank);
    None when it holds it or none is needed."""
    variable = key_variable(provider)
    if variable is None:
        return None
    value = env.get(variable)
    return variable if value is None or not str(value).strip() else None
