"""A GPT-2-style decoder (nanoGPT's model.py) trained with a compiled step on a copy task.

Run with `make demo-gpt` (or `.venv/bin/python examples/gpt.py [--layers N] [--embd N]
[--heads N] [--steps N]`). The model code below is nanoGPT's ``model.py`` (Karpathy, MIT) with
the imports swapped to hlotrace: token and position embeddings in an ``nn.ModuleDict`` named
``transformer`` (``wte``, ``wpe``, ``drop``, ``h`` an ``nn.ModuleList`` of pre-norm blocks,
``ln_f``), ``lm_head`` tied to ``wte``, flash attention (PyTorch 2's
``F.scaled_dot_product_attention``, ``is_causal=True``), GPT-2's
initialization (``c_proj`` weights scaled by ``1/sqrt(2 * n_layer)``) and
``configure_optimizers``: AdamW with two parameter groups, weight decay on matrices and
embeddings only (no decay for biases and norms). Keys match nanoGPT's and Hugging Face's
GPT-2 layout (``transformer.h.0.attn.c_attn.weight``), so ``nn.load_torch_state_dict`` maps a
PyTorch checkpoint of the same size onto it.

Task: each sequence is ``BOS a1 .. aK SEP a1 .. aK`` with ``a1 .. aK`` drawn from 12 symbols;
targets before SEP are -1 (``ignore_index=-1``, as nanoGPT's loss), so the model is scored
on the copy only, which a causal decoder learns by attending back. The step -- forward,
cross-entropy, backward, ``clip_grad_norm_``, AdamW -- is one XLA executable; the learning
rate follows a linear warmup then a cosine decay (``optim.lr_scheduler``), and a new lr each
step does not recompile.

No line of the model code differs from nanoGPT's original but the imports (``import
hlotrace.torch as torch``, ``import hlotrace.torch.nn as nn``, ``from hlotrace.torch.nn import
functional as F``: nanoGPT's ``torch``, ``torch.nn``, ``torch.nn.functional``) and the layout
(ruff's formatting, ``# noqa`` comments). ``CausalSelfAttention`` takes nanoGPT's flash branch,
as PyTorch 2 does: ``torch.nn.functional.scaled_dot_product_attention`` exists, so no
``attn.bias`` mask buffer is registered (the benchmarks' jax peers build their own mask); its
explicit branch runs where that function is missing (tests/test_ported_models.py runs both and
compares them). ``configure_optimizers`` takes nanoGPT's ``device_type`` (``"cpu"`` here): its
``inspect`` check for a ``fused`` AdamW runs as written and finds none.

The training loop (not part of model.py) records the step in a GradManager: ``with gm:`` around
the forward and ``loss.backward()`` (which is ``gm.backward(loss)``), ``clip_grad_norm_``,
``optimizer.step()``, ``optimizer.zero_grad(set_to_none=True)`` in an ``xla_trace`` function;
nanoGPT's hand-written ``get_lr`` is the equivalent ``SequentialLR(LinearLR, CosineAnnealingLR)``.
Dropped, unused here: ``crop_block_size``, ``from_pretrained`` (downloads), ``estimate_mfu``
and ``generate`` (``torch.multinomial``).
"""

from __future__ import annotations

import argparse
import inspect
import math
import time
from dataclasses import dataclass

import numpy as np

import hlotrace.torch as torch
import hlotrace.torch.nn as nn
from hlotrace.autodiff import GradManager
from hlotrace.jit import xla_trace
from hlotrace.torch.nn import functional as F

# -- the model: nanoGPT's model.py -------------------------------------------------------------


class LayerNorm(nn.Module):
    """LayerNorm but with an optional bias. PyTorch doesn't support simply bias=False"""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):  # noqa: A002  (nanoGPT's name)
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        # regularization
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        # flash attention make GPU go brrrrr but support is only in PyTorch >= 2.0
        self.flash = hasattr(torch.nn.functional, "scaled_dot_product_attention")
        if not self.flash:
            print("WARNING: using slow attention. Flash Attention requires PyTorch >= 2.0")
            # causal mask to ensure that attention is only applied to the left in the input sequence
            self.register_buffer(
                "bias",
                torch.tril(torch.ones(config.block_size, config.block_size)).view(
                    1, 1, config.block_size, config.block_size
                ),
            )

    def forward(self, x):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        if self.flash:
            # efficient attention using Flash Attention CUDA kernels
            y = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0, is_causal=True
            )
        else:
            # manual implementation of attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side

        # output projection
        y = self.resid_dropout(self.c_proj(y))
        return y


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        x = self.c_fc(x)
        x = self.gelu(x)
        x = self.c_proj(x)
        x = self.dropout(x)
        return x


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304  # GPT-2 vocab_size of 50257, padded up to nearest multiple of 64 for efficiency
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True  # True: bias in Linears and LayerNorms, like GPT-2. False: a bit better and faster


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        self.config = config

        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # with weight tying when using torch.compile() some warnings get generated:
        # "UserWarning: functional_call was passed multiple values for tied weights.
        # This behavior is deprecated and will be an error in future versions"
        # not 100% sure what this is, so far seems to be harmless. TODO investigate
        self.transformer.wte.weight = self.lm_head.weight  # https://paperswithcode.com/method/weight-tying

        # init all weights
        self.apply(self._init_weights)
        # apply special scaled init to the residual projections, per GPT-2 paper
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        # report number of parameters
        print("number of parameters: %.2fM" % (self.get_num_params() / 1e6,))  # noqa: UP031  (nanoGPT's)

    def get_num_params(self, non_embedding=True):
        """
        Return the number of parameters in the model.
        For non-embedding count (default), the position embeddings get subtracted.
        The token embeddings would too, except due to the parameter sharing these
        params are actually used as weights in the final layer, so we include them.
        """
        n_params = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n_params -= self.transformer.wpe.weight.numel()
        return n_params

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()  # noqa: RUF059  (nanoGPT names both)
        assert t <= self.config.block_size, (
            f"Cannot forward sequence of length {t}, block size is only {self.config.block_size}"
        )
        pos = torch.arange(0, t, dtype=torch.long, device=device)  # shape (t)

        # forward the GPT model itself
        tok_emb = self.transformer.wte(idx)  # token embeddings of shape (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos)  # position embeddings of shape (t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)

        if targets is not None:
            # if we are given some desired targets also calculate the loss
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:
            # inference-time mini-optimization: only forward the lm_head on the very last position
            logits = self.lm_head(x[:, [-1], :])  # note: using list [-1] to preserve the time dim
            loss = None

        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        # start with all of the candidate parameters
        param_dict = {pn: p for pn, p in self.named_parameters()}
        # filter out those that do not require grad
        param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
        # create optim groups. Any parameters that is 2D will be weight decayed, otherwise no.
        # i.e. all weight tensors in matmuls + embeddings decay, all biases and layernorms don't.
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        num_decay_params = sum(p.numel() for p in decay_params)
        num_nodecay_params = sum(p.numel() for p in nodecay_params)
        print(f"num decayed parameter tensors: {len(decay_params)}, with {num_decay_params:,} parameters")
        print(f"num non-decayed parameter tensors: {len(nodecay_params)}, with {num_nodecay_params:,} parameters")
        # Create AdamW optimizer and use the fused version if it is available
        fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == "cuda"
        extra_args = dict(fused=True) if use_fused else dict()
        optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)
        print(f"using fused AdamW: {use_fused}")
        return optimizer


def gpt(n_layer=6, n_embd=384, n_head=6, block_size=128, vocab_size=14, dropout=0.0, bias=True) -> GPT:
    """A GPT of the given size (nanoGPT's ``GPT(GPTConfig(...))``); the default vocabulary is
    the copy task's 12 symbols + BOS + SEP."""
    return GPT(
        GPTConfig(
            block_size=block_size,
            vocab_size=vocab_size,
            n_layer=n_layer,
            n_head=n_head,
            n_embd=n_embd,
            dropout=dropout,
            bias=bias,
        )
    )


# -- the copy task and training ---------------------------------------------------------------

SYMBOLS = 12
BOS, SEP = SYMBOLS, SYMBOLS + 1
VOCAB = SYMBOLS + 2


def batch(rng: np.random.Generator, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) int32 of shape (n, 2k + 1): ``x = BOS a SEP a[:-1]``, ``y`` the next tokens with
    -1 (ignored) before the copy."""
    body = rng.integers(0, SYMBOLS, (n, k))
    seq = np.concatenate([np.full((n, 1), BOS), body, np.full((n, 1), SEP), body], axis=1).astype(np.int32)
    x, y = seq[:, :-1], seq[:, 1:].copy()
    y[:, :k] = -1
    return x, y


def train_step(x, y, *, model, opt, gm, grad_clip=1.0):
    with gm:
        _, loss = model(x, y)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


compiled_step = xla_trace(train_step)


def schedule(opt, warmup_iters: int, max_iters: int, min_lr_ratio: float = 0.1):
    """nanoGPT's get_lr as a scheduler: linear warmup from lr / warmup_iters, then a cosine
    decay to ``min_lr_ratio * lr`` at ``max_iters``."""
    lr = opt.param_groups[0]["lr"]
    warmup = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0 / warmup_iters, total_iters=warmup_iters)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max_iters - warmup_iters, eta_min=min_lr_ratio * lr)
    return torch.optim.lr_scheduler.SequentialLR(opt, [warmup, cosine], milestones=[warmup_iters])


@xla_trace
def predict(x, y, *, model):
    """Logits at every position (nanoGPT's forward computes them all when given targets)."""
    return model(x, y)[0]


def copy_accuracy(model, x: np.ndarray, y: np.ndarray) -> float:
    predicted = predict(torch.from_numpy(x), torch.from_numpy(y), model=model).numpy().argmax(axis=-1)
    scored = y >= 0
    return float(np.mean(predicted[scored] == y[scored]))


def main(argv=None) -> list[float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--embd", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--k", type=int, default=8, help="symbols to copy (sequence length 2k + 1)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    model = gpt(n_layer=args.layers, n_embd=args.embd, n_head=args.heads, block_size=2 * args.k + 1, vocab_size=VOCAB)
    print(f"GPT: {args.layers} layers, n_embd {args.embd}, {args.heads} heads, {model.get_num_params():,} parameters")
    opt = model.configure_optimizers(weight_decay=0.1, learning_rate=args.lr, betas=(0.9, 0.95), device_type="cpu")
    gm = GradManager().attach(model.parameters())
    scheduler = schedule(opt, warmup_iters=max(1, args.steps // 10), max_iters=args.steps)
    rng = np.random.default_rng(args.seed)
    x_test, y_test = batch(np.random.default_rng(args.seed + 1), 256, args.k)

    losses = []
    start = time.perf_counter()
    for step in range(args.steps):
        x, y = batch(rng, args.batch, args.k)
        losses.append(float(compiled_step(torch.from_numpy(x), torch.from_numpy(y), model=model, opt=opt, gm=gm)))
        scheduler.step()
        if step % 50 == 49 or step == args.steps - 1:
            print(
                f"step {step + 1:4d}  loss {np.mean(losses[-50:]):.4f} (mean of the last 50)  "
                f"lr {opt.param_groups[0]['lr']:.2e}  copy accuracy {copy_accuracy(model, x_test, y_test):.3f}"
            )
    elapsed = time.perf_counter() - start
    print(f"compiled executables for the step: {compiled_step.cache_size}; {args.steps} steps in {elapsed:.1f} s")
    print(f"final copy accuracy: {copy_accuracy(model, x_test, y_test):.3f}")
    return losses


if __name__ == "__main__":
    main()
