"""`--model DIR`: a Hugging Face Llama checkpoint directory served end to end."""

from dataclasses import replace
from pathlib import Path

import openai
import pytest
import torch
import transformers

from reference_server.model import BUILTIN_MODELS, LlamaForCausalLM, init_random_weights
from reference_server.weights import save_hf_checkpoint

from .server_fixture import running_server
from .test_tokenizer import CHAT_TEMPLATE, byte_level_bpe, write_model_dir


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tok = byte_level_bpe()
    config = replace(BUILTIN_MODELS["tiny"], vocab_size=tok.get_vocab_size(), bos_token_id=0,
                     eos_token_ids=(1,))
    model = LlamaForCausalLM(config)
    init_random_weights(model, seed=3)
    path = tmp_path_factory.mktemp("ckpt")
    save_hf_checkpoint(model, path)
    write_model_dir(path, tok, chat_template=CHAT_TEMPLATE)
    return path


def test_a_checkpoint_dir_serves_what_transformers_generates(checkpoint_dir: Path):
    hf = transformers.LlamaForCausalLM.from_pretrained(checkpoint_dir).eval()
    hf_tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(checkpoint_dir /
                                                                     "tokenizer.json"))
    prompt = "the quick brown fox"
    ids = [0, *hf_tok.encode(prompt, add_special_tokens=False)]
    with torch.inference_mode():
        expected = hf.generate(torch.tensor([ids]), max_new_tokens=8, min_new_tokens=8,
                               do_sample=False, eos_token_id=None, pad_token_id=2)[0, len(ids):]
    with running_server(model=str(checkpoint_dir), served_model_name="ckpt") as s:
        client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0)
        resp = client.completions.create(model="ckpt", prompt=prompt, max_tokens=8,
                                         temperature=0, extra_body={"ignore_eos": True})
        assert resp.usage.prompt_tokens == len(ids)
        assert resp.choices[0].text == hf_tok.decode(expected.tolist(),
                                                     skip_special_tokens=True)
        chat = client.chat.completions.create(
            model="ckpt", messages=[{"role": "user", "content": "hello"}], max_tokens=4,
            temperature=0, extra_body={"ignore_eos": True})
        assert chat.usage.completion_tokens == 4
