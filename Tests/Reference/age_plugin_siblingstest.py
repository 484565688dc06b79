"""age-plugin-siblingstest: an age plugin made for the tests, written from C2SP age-plugin.md alone.

It speaks both v1 state machines (recipient-v1, identity-v1) over standard input and output, so that stock
`age`, and the Age module's own plugin client, can each drive it. Its keys are X25519, kept in the identity
string itself: `AGE-PLUGIN-SIBLINGSTEST-1...` holds the 32-byte private key, `age1siblingstest1...` the public
key. (A real plugin's identity names a key in hardware; this one stands in for it in the tests.) Its stanza is

    -> siblingstest <base64 ephemeral share>
    <base64 ChaCha20-Poly1305(HKDF-SHA-256(shared, salt = share || recipient, info "siblingstest"), file key)>

Behaviour the tests ask for, through the environment:
  AGE_PLUGIN_SIBLINGSTEST_MODE = absent   the token is "not plugged in": identity-v1 answers `error identity`
                               = crash    it exits with status 3 after phase 1, saying so on standard error
                               = pin      identity-v1 asks for a PIN (request-secret), which must be 123456
                               = msg      identity-v1 shows a message ("touch the test token") before unwrapping
                               = grease   identity-v1 first sends a command no client knows, a request-public and a
                                          confirm, and fails unless the client answers unsupported, then ok or fail
                               = labels   recipient-v1 sends `labels postquantum`, which a client that did not send
                                          extension-labels must refuse
  AGE_PLUGIN_SIBLINGSTEST_FAIL_RUN = n   the n-th identity-v1 run the log records (counting from 1) fails as
                                          `absent` does: a token that goes away in the middle of a command
  AGE_PLUGIN_SIBLINGSTEST_LOG = a file that gets one line per run: the state machine, and the mode.

`age-plugin-siblingstest --generate` prints a new identity file: `# recipient: age1siblingstest1...`, then the
identity.
"""

import base64
import os
import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

NAME = "siblingstest"
RECIPIENT_HRP = "age1" + NAME
IDENTITY_HRP = "AGE-PLUGIN-" + NAME.upper() + "-"
CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
PIN = "123456"


# Bech32, BIP 173 (no length limit, as age uses it).
def polymod(values):
    generator = [0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3]
    checksum = 1
    for value in values:
        top = checksum >> 25
        checksum = (checksum & 0x1FFFFFF) << 5 ^ value
        for i in range(5):
            checksum ^= generator[i] if ((top >> i) & 1) else 0
    return checksum


def expand(hrp):
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def regroup(data, source, target, pad):
    accumulator, bits, out = 0, 0, []
    for value in data:
        accumulator = (accumulator << source) | value
        bits += source
        while bits >= target:
            bits -= target
            out.append((accumulator >> bits) & ((1 << target) - 1))
    if pad and bits:
        out.append((accumulator << (target - bits)) & ((1 << target) - 1))
    elif not pad and (bits >= source or (accumulator << (target - bits)) & ((1 << target) - 1)):
        raise ValueError("bad padding")
    return out


def bech32_encode(hrp, data):
    lower = hrp.lower()
    values = regroup(data, 8, 5, True)
    check = polymod(expand(lower) + values + [0] * 6) ^ 1
    values += [(check >> 5 * (5 - i)) & 31 for i in range(6)]
    text = lower + "1" + "".join(CHARSET[v] for v in values)
    return text.upper() if hrp.isupper() else text


def bech32_decode(text):
    if text.lower() != text and text.upper() != text:
        raise ValueError("mixed case")
    text = text.lower()
    separator = text.rfind("1")
    hrp, values = text[:separator], [CHARSET.index(c) for c in text[separator + 1 :]]
    if polymod(expand(hrp) + values) != 1:
        raise ValueError("bad checksum")
    return hrp, bytes(regroup(values[:-6], 5, 8, False))


def b64(data):
    return base64.b64encode(data).decode().rstrip("=")


def unb64(text):
    data = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    if b64(data) != text:
        raise ValueError("non-canonical base64")
    return data


# Stanzas over standard input and output.
def read_stanza():
    line = sys.stdin.buffer.readline()
    if not line:
        raise EOFError
    line = line.decode().rstrip("\n")
    if not line.startswith("-> "):
        raise ValueError("not a stanza: %r" % line)
    arguments = line[3:].split(" ")
    body = b""
    while True:
        body_line = sys.stdin.buffer.readline().decode().rstrip("\n")
        body += unb64(body_line)
        if len(body_line) < 64:
            break
    return arguments[0], arguments[1:], body


def write_stanza(command, arguments=(), body=b""):
    text = b64(body)
    lines = [text[i : i + 64] for i in range(0, len(text), 64)]
    if not lines or len(lines[-1]) == 64:
        lines.append("")
    sys.stdout.write("-> " + " ".join([command, *arguments]) + "\n" + "\n".join(lines) + "\n")
    sys.stdout.flush()


def command(name, arguments=(), body=b""):
    """Sends a phase 2 command and returns the client's answer."""
    write_stanza(name, arguments, body)
    return read_stanza()


def read_phase1():
    commands = []
    while True:
        stanza = read_stanza()
        if stanza[0] == "done":
            return commands
        commands.append(stanza)


def wrap_key(shared, share, recipient):
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=share + recipient, info=NAME.encode()).derive(shared)


def public_bytes(key):
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def recipient_v1(mode):
    recipients, file_keys, errors = [], [], []
    for name, arguments, body in read_phase1():
        if name == "add-recipient":
            try:
                hrp, key = bech32_decode(arguments[0])
                if hrp != RECIPIENT_HRP or len(key) != 32:
                    raise ValueError("not a %s recipient" % NAME)
                recipients.append(key)
            except ValueError as error:
                errors.append(("recipient", len(recipients), str(error)))
                recipients.append(None)
        elif name == "add-identity":
            hrp, secret = bech32_decode(arguments[0])
            recipients.append(public_bytes(X25519PrivateKey.from_private_bytes(secret)))
        elif name == "wrap-file-key":
            file_keys.append(body)
    if mode == "crash":
        sys.stderr.write("the test plugin crashed on purpose\n")
        sys.exit(3)
    if errors:
        for kind, index, message in errors:
            command("error", [kind, str(index)], message.encode())
        write_stanza("done")
        return
    if mode == "labels":
        command("labels", ["postquantum"])
    for index, file_key in enumerate(file_keys):
        for recipient in recipients:
            ephemeral = X25519PrivateKey.generate()
            share = public_bytes(ephemeral)
            shared = ephemeral.exchange(X25519PublicKey.from_public_bytes(recipient))
            sealed = ChaCha20Poly1305(wrap_key(shared, share, recipient)).encrypt(b"\0" * 12, file_key, b"")
            command("recipient-stanza", [str(index), NAME, b64(share)], sealed)
    write_stanza("done")


def identity_v1(mode):
    identities, stanzas = [], {}
    for name, arguments, body in read_phase1():
        if name == "add-identity":
            hrp, secret = bech32_decode(arguments[0])
            identities.append(X25519PrivateKey.from_private_bytes(secret))
        elif name == "recipient-stanza":
            stanzas.setdefault(int(arguments[0]), []).append((arguments[1], arguments[2:], body))
    if mode == "crash":
        sys.stderr.write("the test plugin crashed on purpose\n")
        sys.exit(3)
    if mode == "absent" or failing_run():
        command("error", ["identity", "0"], b"the test token is not plugged in: plug it in and try again")
        write_stanza("done")
        return
    if mode == "grease":
        answers = [
            command("grease-" + os.urandom(4).hex(), ["x"], os.urandom(9))[0],
            command("request-public", [], b"a public value")[0],
            command("confirm", [b64(b"Yes"), b64(b"No")], b"go on?")[0],
        ]
        if answers[0] != "unsupported" or answers[1] not in ("ok", "fail") or answers[2] not in ("ok", "fail"):
            command("error", ["internal"], ("the client answered %s" % answers).encode())
            write_stanza("done")
            return
    if mode == "pin":
        answer = command("request-secret", [], b"PIN for the test token")
        if answer[0] != "ok" or answer[2].decode() != PIN:
            command("error", ["identity", "0"], b"wrong PIN for the test token")
            write_stanza("done")
            return
    if mode == "msg":
        command("msg", [], b"touch the test token")
    for index in sorted(stanzas):
        mine = [(i, s) for i, s in enumerate(stanzas[index]) if s[0] == NAME]
        bad = [i for i, (_, arguments, body) in mine if len(arguments) != 1 or len(body) != 32]
        if bad:
            command("error", ["stanza", str(index), str(bad[0])], b"a malformed siblingstest stanza")
            continue
        for _, (_, arguments, body) in mine:
            share = unb64(arguments[0])
            found = None
            for identity in identities:
                shared = identity.exchange(X25519PublicKey.from_public_bytes(share))
                try:
                    key = wrap_key(shared, share, public_bytes(identity))
                    found = ChaCha20Poly1305(key).decrypt(b"\0" * 12, body, b"")
                    break
                except Exception:
                    continue
            if found is not None:
                command("file-key", [str(index)], found)
                break
    write_stanza("done")


def failing_run():
    """Whether this identity-v1 run is the one AGE_PLUGIN_SIBLINGSTEST_FAIL_RUN names (the log holds this run)."""
    wanted, log = os.environ.get("AGE_PLUGIN_SIBLINGSTEST_FAIL_RUN"), os.environ.get("AGE_PLUGIN_SIBLINGSTEST_LOG")
    if not wanted or not log:
        return False
    with open(log) as runs:
        count = sum(1 for line in runs if line.startswith("--age-plugin=identity-v1"))
    return count == int(wanted)


def main():
    arguments = sys.argv[1:]
    mode = os.environ.get("AGE_PLUGIN_SIBLINGSTEST_MODE", "")
    if arguments == ["--generate"]:
        key = X25519PrivateKey.generate()
        secret = key.private_bytes_raw()
        print("# recipient: " + bech32_encode(RECIPIENT_HRP, public_bytes(key)))
        print(bech32_encode(IDENTITY_HRP, secret))
        return
    log = os.environ.get("AGE_PLUGIN_SIBLINGSTEST_LOG")
    if log:
        with open(log, "a") as out:
            out.write("%s %s\n" % (" ".join(arguments), mode))
    if arguments == ["--age-plugin=recipient-v1"]:
        recipient_v1(mode)
    elif arguments == ["--age-plugin=identity-v1"]:
        identity_v1(mode)
    else:
        sys.stderr.write("age-plugin-siblingstest: unknown state machine %s\n" % " ".join(arguments))
        sys.exit(1)


if __name__ == "__main__":
    main()
