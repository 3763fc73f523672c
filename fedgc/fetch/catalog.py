"""What ``fedgc fetch`` can get: the file list (``files.tsv``), and each item's licence and citation.

``files.tsv`` lists, per file, its path in the data directory, its checksum and the URLs it is
downloaded from (tried in order). The URLs and SHA-256 sums come from the PROVENANCE.md files of the
project's shared data folder (each file there is a byte-for-byte copy of the file at that URL,
except where noted); Fashion-MNIST's MD5s are those its authors publish (docs/data-and-models.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ITEMS = ("mnist", "fashion-mnist", "shakespeare", "traces")

ABOUT = {
    "mnist": [
        ("MNIST (Y. LeCun, C. Cortes, C. J. C. Burges), the four original IDX files. The authors' page states no "
        "licence; MNIST is widely redistributed for research (often cited as CC BY-SA 3.0)."),
        ("Cite: Y. LeCun, L. Bottou, Y. Bengio, P. Haffner, \"Gradient-based learning applied to document "
        "recognition\", Proc. IEEE 86(11), 1998."),
    ],
    "fashion-mnist": [
        "Fashion-MNIST (Zalando Research), MIT licence.",
        ("Cite: H. Xiao, K. Rasul, R. Vollgraf, \"Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine "
        "Learning Algorithms\", arXiv:1708.07747, 2017."),
    ],
    "shakespeare": [
        ("LEAF Shakespeare, a 10-client subset (one LEAF run, as committed in wlffffff/MAB-Shapley). Text: Project "
        "Gutenberg, public domain; LEAF code BSD-2-Clause; the hosting repository states no licence."),
        "Cite: S. Caldas et al., \"LEAF: A Benchmark for Federated Settings\", arXiv:1812.01097, 2018.",
    ],
    "traces": [
        ("mahimahi/: cellular traces, GPL-3.0-or-later (ravinet/mahimahi). Cite: K. Winstein, A. Sivaraman, "
        "H. Balakrishnan, \"Stochastic Forecasts Achieve High Throughput and Low Delay over Cellular Networks\", "
        "NSDI 2013; R. Netravali et al., \"Mahimahi: Accurate Record-and-Replay for HTTP\", USENIX ATC 2015."),
        ("pensieve/: FCC broadband + Norway HSDPA traces, MIT (confiwent/Real-world-bandwidth-traces). Cite: "
        "H. Mao, R. Netravali, M. Alizadeh, \"Neural Adaptive Video Streaming with Pensieve\", SIGCOMM 2017; "
        "C. Riiser et al., \"Commute Path Bandwidth Traces from 3G Networks\", MMSys 2013."),
        ("lumos5g/: CC BY 4.0. Cite: A. Narayanan et al., \"Lumos5G: Mapping and Predicting Commercial mmWave 5G "
        "Throughput\", IMC 2020."),
        ("5gophers/: CC BY 4.0. Cite: A. Narayanan et al., \"A First Look at Commercial 5G Performance on "
        "Smartphones\", WWW 2020."),
        ("fedscale/: FedScale device capacities (Apache-2.0) paired with M-Lab NDT speeds (CC0) by eqfy/fl-experiments "
        "(no licence stated). Cite: F. Lai et al., \"FedScale: Benchmarking Model and System Performance of "
        "Federated Learning at Scale\", ICML 2022."),
    ],
}


@dataclass(frozen=True)
class Entry:
    item: str
    path: str  # relative to the data directory, '/'-separated
    algorithm: str  # a hashlib name: sha256 or md5
    digest: str
    urls: tuple[str, ...]  # or ("derived:<path>",): computed locally from that file

    @property
    def derived_from(self) -> str | None:
        first = self.urls[0]
        return first[len("derived:"):] if first.startswith("derived:") else None


def load_entries(table: Path | None = None) -> list[Entry]:
    table = table or Path(__file__).with_name("files.tsv")
    entries = []
    for number, line in enumerate(table.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        item, path, checksum, urls = line.split("\t")
        algorithm, _, digest = checksum.partition(":")
        if item not in ITEMS or algorithm not in ("sha256", "md5") or not digest or not urls.split():
            raise ValueError(f"{table}:{number}: malformed entry")
        entries.append(Entry(item, path, algorithm, digest, tuple(urls.split())))
    return entries


def entries_for(items: list[str], table: Path | None = None) -> dict[str, list[Entry]]:
    every = load_entries(table)
    return {item: [e for e in every if e.item == item] for item in items}
