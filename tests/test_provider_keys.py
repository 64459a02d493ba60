"""One provider->key table (bat.provider_keys) for the scaffold, doctor and eval.run."""

from hypothesis import given
from hypothesis import strategies as st

from bat.provider_keys import KEY_VARIABLES, key_variable, missing_key
from bat.scaffold.values import PROVIDERS


def test_the_scaffold_names_the_same_variables():
    for name, provider in PROVIDERS.items():
        assert provider.api_key_env == KEY_VARIABLES[name]
    assert key_variable("OpenAI ") == "OPENAI_API_KEY"
    assert key_variable("gemini") == key_variable("google") == "GOOGLE_API_KEY"
    assert key_variable("ollama") is None and key_variable("someone-else") is None


def test_missing_key():
    assert missing_key("openai", {}) == "OPENAI_API_KEY"
    assert missing_key("openai", {"OPENAI_API_KEY": "  "}) == "OPENAI_API_KEY"
    assert missing_key("openai", {"OPENAI_API_KEY": "sk"}) is None
    assert missing_key("ollama", {}) is None


@given(provider=st.one_of(st.none(), st.integers(), st.text(max_size=40)))
def test_any_provider_value_is_answered(provider):
    variable = key_variable(provider)
    assert variable is None or variable in KEY_VARIABLES.values()
