"""The outside RFC 9497 VOPRF (mode 1, ristretto255-SHA512) the Swift PrivacyPass tests compare against, in
oracle.py's protocol.

One JSON request per line on stdin: {"op": NAME, ...arguments}, bytes as hex, lists of bytes as comma-separated
hex; reply {"ok": {...}} or {"error": MESSAGE}. The implementation is PyPI `voprf` (asterized/voprf, Rust), which
no one here wrote. Its batch output serializes as proof (64) followed by the evaluated elements (n x 32).
Blinding clients are kept between requests by a session number (one oracle process per test).
"""

import json
import sys

_clients = {}


def h(name, request):
    return bytes.fromhex(request[name])


def _hex_list(name, request):
    return [bytes.fromhex(item) for item in request[name].split(",") if item]


def _ristretto():
    from voprf import ristretto

    return ristretto


def check(r):
    _ristretto()
    return {}


def derive(r):
    server = _ristretto().Evaluator.from_seed(h("seed", r), h("info", r))
    return {"out": server.public_key.serialize().hex()}


def evaluate(r):
    server = _ristretto().Evaluator.from_seed(h("seed", r), h("info", r))
    return {"out": server.evaluate_known_input(h("input", r)).hex()}


def blind_evaluate(r):
    rist = _ristretto()
    server = rist.Evaluator.from_seed(h("seed", r), h("info", r))
    blinded = [rist.BlindedInput.deserialize(item) for item in _hex_list("blinded", r)]
    output = server.evaluate_batch(blinded).serialize()
    elements = [output[64 + 32 * i : 96 + 32 * i].hex() for i in range(len(blinded))]
    return {"proof": output[:64].hex(), "elements": ",".join(elements)}


def blind(r):
    rist = _ristretto()
    pairs = [rist.Client.blind(item) for item in _hex_list("inputs", r)]
    session = len(_clients)
    _clients[session] = [client for client, _ in pairs]
    return {"session": session, "blinded": ",".join(b.serialize().hex() for _, b in pairs)}


def finalize(r):
    rist = _ristretto()
    clients = _clients[r["session"]]
    output = rist.VerifiableBatchOutput.deserialize(h("proof", r) + b"".join(_hex_list("elements", r)))
    key = rist.PublicKey.deserialize(h("public_key", r))
    return {"outputs": ",".join(o.hex() for o in rist.Client.finalize_batch(clients, output, key))}


def main():
    operations = {
        name: fn
        for name, fn in globals().items()
        if type(fn).__name__ == "function" and fn.__module__ == __name__ and not name.startswith("_")
        and name not in ("main", "h")
    }
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"ok": operations[request["op"]](request)}
        except ImportError as error:
            reply = {"error": f"reference missing ({error}): run ./scripts/setup.sh to install requirements.txt"}
        except Exception as error:  # every refusal goes back to the test, which decides what it means
            reply = {"error": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
