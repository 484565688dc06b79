import Foundation
import Sempere

/// What a Sempere vault's storage provider controls (docs/sempere-format.md): vault.json (the signed device list
/// and epochs, parsed before its signature is checked), its body and pin, join requests (with their
/// self-signature), the six join words, and a note's signature trailer. Every error must be a `SempereError`
/// (or, for the bare Codable bodies, a `DecodingError`).
let sempereTarget = FuzzTarget(
    name: "sempere",
    summary: "vault.json, its body and pin, join requests, join words, note trailers (Sempere)",
    maximumLength: 65_536,
    seeds: {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-sempere-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = root.appendingPathComponent("vault")
        _ = try VaultSession.create(
            folder: folder, homeName: "Laptop", postQuantum: false, passphrase: nil,
            configRoot: root.appendingPathComponent("home"))
        let request = try VaultSession.askToJoin(
            folder: folder, name: "Phone", configRoot: root.appendingPathComponent("phone"))
        let vault = try Data(contentsOf: folder.appendingPathComponent("vault.json"))
        let signature = Data(repeating: 0x5a, count: 3373).base64EncodedString()
        let trailer = Data(
            "# A note\n\nText.\n<!-- sempere-note v2 author=0123456789abcdef epoch=1 version=3 signature=\(signature) -->\n"
                .utf8)
        return [vault, try request.encoded(), Data(request.words.description.utf8), trailer]
    },
    run: { input in
        expectOnly(SempereError.self, "SignedVault(parsing:)") { _ = try SignedVault(parsing: input) }
        expectOnlySempereOrDecoding("VaultBody") { _ = try JSONDecoder().decode(VaultBody.self, from: input) }
        expectOnlySempereOrDecoding("VaultPin") { _ = try JSONDecoder().decode(VaultPin.self, from: input) }
        expectOnly(SempereError.self, "JoinRequest(parsing:)") { _ = try JoinRequest(parsing: input) }
        expectOnly(SempereError.self, "JoinWords(parsing:)") {
            _ = try JoinWords(parsing: String(decoding: input, as: UTF8.self))
        }
        _ = VaultNote.Trailer(input)
    })

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
