"""Realistic invite estates for tests and benchmarks: YAML as people write it, and the
server's copy of each invite, a share of which differs.

Names in many scripts (Müller & Söhne, 株式会社サクラ商事, 서울 핀테크, Κρήτη, Москва,
דלתא, دبي, …), every field, optional ones left out of some invites, flow and block lists.
Two layouts: ``split`` (a folder per region, at most 250 invites per file) and ``single``
(one file, as ``reconcile export`` writes a whole estate).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEED = 20261123
PER_FILE = 250
LAYOUTS = ("split", "single")

# (business name stem, legal suffix, ASCII mail domain, region)
BUSINESSES = [
    ("Müller & Söhne", "GmbH", "mueller-soehne", "emea"),
    ("Société Générale de Café", "SARL", "cafe-sarl", "emea"),
    ("Ørsted Vind", "ApS", "orsted-vind", "emea"),
    ("Łódzkie Zakłady Włókiennicze", "Sp. z o.o.", "lzw", "emea"),
    ("Zürcher Treuhand", "AG", "zuercher-treuhand", "emea"),
    ("Κρήτη Ναυτιλιακή", "Α.Ε.", "kriti-naftiliaki", "emea"),
    ("Московские Платёжные Системы", "ООО", "mps", "emea"),
    ("İstanbul Ödeme Hizmetleri", "A.Ş.", "istanbul-odeme", "emea"),
    ("דלתא סחר", "בע״מ", "delta-trade", "emea"),
    ("دبي للتجارة العامة", "ذ.م.م", "dubai-trading", "emea"),
    ("Acme Holdings", "Ltd", "acme", "emea"),
    ("株式会社サクラ商事", "", "sakura-shoji", "apac"),
    ("서울 핀테크", "주식회사", "seoul-fintech", "apac"),
    ("深圳前海支付", "有限公司", "qianhai-pay", "apac"),
    ("Công ty Thương mại Việt Nam", "TNHH", "vn-trade", "apac"),
    ("ธนาคารกรุงเทพ การค้า", "จำกัด", "krungthep-trade", "apac"),
    ("Kiwi Ledger", "Ltd", "kiwiledger", "apac"),
    ("मुंबई पेमेंट्स", "प्रा. लि.", "mumbai-payments", "apac"),
    ("Nuñez Exportaciones", "S.A.", "nunez", "latam"),
    ("São Paulo Pagamentos", "Ltda.", "sp-pagamentos", "latam"),
    ("Café Bogotá Comercial", "S.A.S.", "cafe-bogota", "latam"),
    ("Northwind Traders", "Inc.", "northwind", "na"),
    ("Québec Paiements", "Inc.", "quebec-paiements", "na"),
]
CONTACTS = [
    "José Nuñez",
    "Jane Doe",
    "Zoë Ångström",
    "Łukasz Wiśniewski",
    "Søren Kierkegård",
    "Γιώργος Παπαδόπουλος",
    "Анна Кузнецова",
    "山田 太郎",
    "김민준",
    "Nguyễn Văn An",
    "Ahmed Al-Farsi",
    "François Dubois",
    "María José García",
    "O'Connor Siobhán",
]
COUNTRY_CODES = {"emea": ["44", "49", "33", "45", "48"], "apac": ["81", "82", "65", "64"]}
COUNTRY_CODES |= {"latam": ["55", "52", "57"], "na": ["1"]}
GROUPS = ["enterprise", "mid-market", "smb", "fintech", "marketplace", "priority"]
ADD_ONS = ["edd", "sanctions-plus", "pep-screening", "adverse-media", "ubo-deep-check"]
ATTACHMENTS = [
    "certificate-of-incorporation",
    "proof-of-address",
    "ubo-declaration",
    "bank-statement",
    "articles-of-association",
]
_PLAIN_SAFE = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`][^#:]*")


def _phone(rng: random.Random, region: str) -> str:
    code = rng.choice(COUNTRY_CODES[region])
    return "+" + code + "".join(rng.choice("0123456789") for _ in range(10 - len(code) + 1))


def make_invite(index: int, rng: random.Random) -> dict[str, Any]:
    """One desired invite; every field is used, the optional ones by most invites."""
    stem, suffix, domain, region = rng.choice(BUSINESSES)
    name = f"{stem} {suffix}".strip() + f" №{index}"
    invite: dict[str, Any] = {
        "id": f"inv_{index:06d}",
        "name": name,
        "email": f"kyb+{index}@{domain}.example",
    }
    if rng.random() < 0.8:
        invite["phone"] = _phone(rng, region)
    if rng.random() < 0.7:
        person = rng.choice(CONTACTS)
        contact = {"name": person, "email": f"contact{index}@{domain}.example"}
        if rng.random() < 0.6:
            contact["phone"] = _phone(rng, region)
        invite["primaryContact"] = contact
    invite["groups"] = [region, *rng.sample(GROUPS, rng.randint(0, 2))]
    if rng.random() < 0.6:
        invite["addOns"] = rng.sample(ADD_ONS, rng.randint(1, 2))
    if rng.random() < 0.7:
        invite["attachments"] = rng.sample(ATTACHMENTS, rng.randint(1, 3))
    return invite


def _scalar(text: str) -> str:
    """Plain when YAML reads it back as the same string, else double-quoted."""
    if _PLAIN_SAFE.fullmatch(text) and text == text.strip():
        return text
    return json.dumps(text, ensure_ascii=False)


def invite_yaml(invite: dict[str, Any], rng: random.Random) -> str:
    """The invite as a person writes it: flow lists for short sets, quoted phones."""
    lines = [f"  - id: {invite['id']}", f"    name: {_scalar(invite['name'])}"]
    lines.append(f"    email: {invite['email']}")
    if "phone" in invite:
        lines.append(f'    phone: "{invite["phone"]}"')
    if "primaryContact" in invite:
        contact = invite["primaryContact"]
        lines.append("    primaryContact:")
        lines.append(f"      name: {_scalar(contact['name'])}")
        lines.append(f"      email: {contact['email']}")
        if "phone" in contact:
            lines.append(f'      phone: "{contact["phone"]}"')
    for key in ("groups", "addOns", "attachments"):
        if key not in invite:
            continue
        items = invite[key]
        if len(items) <= 2 or rng.random() < 0.5:
            lines.append(f"    {key}: [{', '.join(items)}]")
        else:
            lines.append(f"    {key}:")
            lines.extend(f"      - {item}" for item in items)
    return "\n".join(lines) + "\n"


def _write_file(path: Path, title: str, invites: list[dict[str, Any]], rng: random.Random) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        out.write(f"# Business invites {title}, generated for a benchmark\ninvites:\n")
        for number, invite in enumerate(invites):
            out.write(("\n" if number else "") + invite_yaml(invite, rng))


def write_invite_files(
    root: Path, invites: list[dict[str, Any]], rng: random.Random, layout: str = "split"
) -> int:
    """Write the invites under ``root``: one file, or a folder per region of small files."""
    if layout == "single":
        _write_file(root / "invites.yaml", "of the whole estate", invites, rng)
        return 1
    by_region: dict[str, list[dict[str, Any]]] = {}
    for invite in invites:
        by_region.setdefault(invite["groups"][0], []).append(invite)
    files = 0
    for region, members in by_region.items():
        for start in range(0, len(members), PER_FILE):
            path = root / region / f"invites-{start // PER_FILE + 1:03d}.yaml"
            chunk = members[start : start + PER_FILE]
            _write_file(path, f"in {region.upper()}", chunk, rng)
            files += 1
    return files


def server_copy(invite: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The platform's copy of an unchanged invite, with a few fields the YAML leaves out."""
    current: dict[str, Any] = json.loads(json.dumps(invite))
    current["status"] = "pending"
    if "phone" not in current:
        current["phone"] = _phone(rng, invite["groups"][0])  # unmanaged: never compared
    return current


def drift(current: dict[str, Any], kind: int) -> None:
    """Make the server's copy differ from the YAML in one of three ways."""
    if kind % 3 == 0:
        current["email"] = current["email"].replace("kyb+", "onboarding+")
    elif kind % 3 == 1:
        current["groups"] = [*current["groups"][1:], "legacy"]
    elif "primaryContact" in current:
        current["primaryContact"]["name"] += " (old)"
    else:
        current["name"] += " (formerly)"


@dataclass
class Dataset:
    root: Path  # the invite files
    desired: list[dict[str, Any]]
    server: list[dict[str, Any]]
    changed: set[str]
    files: int


def make_dataset(
    root: Path, count: int, changed: int, layout: str = "split", seed: int = SEED
) -> Dataset:
    """``count`` invites written under ``root``, and a server state where ``changed`` differ."""
    rng = random.Random(seed)
    desired = [make_invite(i + 1, rng) for i in range(count)]
    files = write_invite_files(root, desired, rng, layout)
    server = [server_copy(invite, rng) for invite in desired]
    changed_ids = set()
    for kind, index in enumerate(sorted(rng.sample(range(count), changed))):
        drift(server[index], kind)
        changed_ids.add(server[index]["id"])
    return Dataset(root, desired, server, changed_ids, files)
