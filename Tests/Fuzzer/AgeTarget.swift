import Age
import Foundation

/// The age parsers: header, armor, stanzas and payload through `Age.decrypt`, and key files through
/// `AgeKeyFile`. The identities are those of the C2SP CCTV age vectors, so seeds from that corpus get past the
/// header into the payload; scrypt's work factor is capped low, since the parser is what is fuzzed.
let ageTarget = FuzzTarget(
    name: "age",
    summary: "age files (armor, header, stanzas, payload) and key files",
    maximumLength: 140_000,
    seeds: {
        // Files of our own making: the CCTV vectors join them in scripts/fuzz.sh (never committed).
        let identity = X25519Identity()
        let hybrid = HybridIdentity()
        return [
            try Age.encrypt(Data("a seed".utf8), to: [identity.recipient]),
            try Age.encrypt(Data("a seed".utf8), to: [hybrid.recipient], armor: true),
            Data(AgeKeyFile.encode(identity).utf8), Data(AgeKeyFile.encode(hybrid).utf8),
        ]
    },
    run: { input in
        expectOnly(AgeError.self, "Age.decrypt") {
            var released = 0
            try Age.decrypt(input, identities: ageIdentities) { released += $0.count }
        }
        expectOnly(AgeError.self, "AgeKeyFile.identities") {
            _ = try AgeKeyFile.identities(from: String(decoding: input, as: UTF8.self))
        }
    })

let ageIdentities: [any AgeIdentity] = {
    do {
        return [
            try X25519Identity(string: "AGE-SECRET-KEY-1EGTZVFFV20835NWYV6270LXYVK2VKNX2MMDKWYKLMGR48UAWX40Q2P2LM0"),
            try HybridIdentity(
                string: "AGE-SECRET-KEY-PQ-1HZLGZUPT4ETPKDEV8HSGFDCYZ4E522W0A7PU2LHT8EH9W6YLNC3SW78XKG"),
            ScryptIdentity(passphrase: "password", maxWorkFactor: 10),
        ]
    } catch {
        fatalError("the fuzz target's fixed identities do not parse: \(error)")
    }
}()
