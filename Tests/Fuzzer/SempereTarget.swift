import Foundation
import Sempere

/// What a Sempere vault's storage provider controls (docs/sempere-format.md): vault.json (the signed device list
/// and epochs, parsed before its signature is checked), its body and pin, join requests (with their
/// self-signature), the six join words and the pasted join code, a device's note manifest (checked against the
/// device and vault it names, then under a fixed key), and a note's signature trailer. Every error must be a `SempereError`
/// (or, for the bare Codable bodies, a `DecodingError`).
let sempereTarget = FuzzTarget(
    name: "sempere",
    summary: "vault.json, its body and pin, join requests, join words, note trailers (Sempere)",
    maximumLength: 65_536,
    seeds: {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-sempere-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = root.appendingPathComponent("vault")
        var home = try VaultSession.create(
            folder: folder, homeName: "Laptop", postQuantum: false, passphrase: nil,
            configRoot: root.appendingPathComponent("home")
        ).session
        _ = try home.newNote(markdown: "# A note\n\nText.\n")
        let manifests = folder.appendingPathComponent("manifests")
        let manifest = try FileManager.default.contentsOfDirectory(atPath: manifests.path).map {
            try Data(contentsOf: manifests.appendingPathComponent($0))
        }
        let request = try VaultSession.askToJoin(
            folder: folder, name: "Phone", configRoot: root.appendingPathComponent("phone"))
        let vault = try Data(contentsOf: folder.appendingPathComponent("vault.json"))
        let signature = Data(repeating: 0x5a, count: 3373).base64EncodedString()
        let trailer = Data(
            "# A note\n\nText.\n<!-- sempere-note v2 author=0123456789abcdef epoch=1 version=3 signature=\(signature) -->\n"
                .utf8)
        return [vault, try request.encoded(), Data(request.words.description.utf8), Data(request.code.utf8), trailer]
            + manifest
    },
    run: { input in
        expectOnly(SempereError.self, "SignedVault(parsing:)") { _ = try SignedVault(parsing: input) }
        expectOnlySempereOrDecoding("VaultBody") { _ = try JSONDecoder().decode(VaultBody.self, from: input) }
        expectOnlySempereOrDecoding("VaultPin") { _ = try JSONDecoder().decode(VaultPin.self, from: input) }
        expectOnly(SempereError.self, "JoinRequest(parsing:)") { _ = try JoinRequest(parsing: input) }
        expectOnly(SempereError.self, "JoinWords(parsing:)") {
            _ = try JoinWords(parsing: String(decoding: input, as: UTF8.self))
        }
        expectOnly(SempereError.self, "JoinRequest.matching(code:in:)") {
            _ = try JoinRequest.matching(code: String(decoding: input, as: UTF8.self), in: [])
        }
        expectOnly(SempereError.self, "NoteManifest(parsing:)") {
            // Checked against the device and vault it names, so the fuzzer need not guess them.
            let named = try? JSONDecoder().decode(
                NamedManifest.Body.self,
                from: Data((try JSONDecoder().decode(NamedManifest.self, from: input)).body.utf8))
            _ = try NoteManifest(
                parsing: input, device: named?.device ?? "", vaultID: named?.vaultID ?? "", key: certKey.publicKey)
        }
        _ = VaultNote.Trailer(input)
    })

/// The device and vault a manifest file names.
private struct NamedManifest: Decodable {
    let body: String

    struct Body: Decodable {
        let device: String
        let vaultID: String

        enum CodingKeys: String, CodingKey {
            case device
            case vaultID = "vault_id"
        }
    }
}

/// Runs `body`; an error other than a `SempereError` or a `DecodingError` is a finding.
func expectOnlySempereOrDecoding(_ what: String, _ body: () throws -> Void) {
    do {
        try body()
    } catch is SempereError {
    } catch is DecodingError {
    } catch {
        finding("\(what) threw \(type(of: error)), neither a SempereError nor a DecodingError: \(error)")
    }
}
