import Age
import Foundation
import SiblingsCrypto

/// A note: Markdown, signed by the device that wrote it, encrypted as a standard age file to its
/// epoch's vault recipient only (docs/sempere-format.md, "Notes").
///
/// The signature travels inside the encryption, as a Markdown comment on the last line, so the storage
/// provider cannot use it to test guesses of a note's text, and stock `age -d` shows the note with one
/// comment line at its end:
///
///     <!-- sempere-note v1 author=<device_id> epoch=<n> signature=<base64 HybridSignature> -->
///
/// The signature covers vault_id ‖ 0x00 ‖ path ‖ 0x00 ‖ decimal epoch ‖ 0x00 ‖ the Markdown bytes, with
/// context "sempere/v1/note": a note cannot be moved to another path, epoch or vault.
public enum VaultNote {
    static let context = Data("sempere/v1/note".utf8)
    static let prefix = "<!-- sempere-note v1 "

    public struct Opened: Sendable, Equatable {
        public let markdown: String
        public let author: String
        public let epoch: Int
    }

    static func signedBytes(vaultID: String, path: String, epoch: Int, markdown: Data) -> Data {
        // (Markdown that is not valid UTF-8 cannot come from `seal`, which takes a String; the bytes are
        // what is signed either way.)
        Data(vaultID.utf8) + Data([0]) + Data(path.utf8) + Data([0]) + Data(String(epoch).utf8) + Data([0]) + markdown
    }

    /// The age file for `markdown` at `path`, written by `author` in the vault's current epoch.
    public static func seal(markdown: String, path: String, vault: VaultBody, author: DeviceKeys) throws -> Data {
        guard vault.device(author.id) != nil else {
            throw SempereError(.removed, "this device is not listed in the vault, so it cannot write notes")
        }
        let epoch = vault.currentEpoch
        let body = Data(markdown.utf8)
        let signature = try author.signingKey.signature(
            for: signedBytes(vaultID: vault.vaultID, path: path, epoch: epoch.number, markdown: body), context: context)
        let trailer =
            "\n\(prefix)author=\(author.id) epoch=\(epoch.number) signature=\(signature.rawRepresentation.base64EncodedString()) -->\n"
        return try Age.encrypt(body + Data(trailer.utf8), to: [try VaultKeys.recipient(epoch.recipient)])
    }

    /// Opens the note at `path` and checks who wrote it. Throws `.untrustedNote` for a note the provider
    /// (or a removed device after its removal) could have made: no trailer, a signature that fails, an
    /// author not listed during the note's epoch, an epoch other than the one whose key opens it, a note
    /// outside its signer's folder, or a removed device's note that is not in the record of the notes that
    /// existed when it was removed. The reason says which, without the path (callers name the note).
    public static func open(_ file: Data, path: String, vault: VaultBody, keyring: VaultKeyring) throws -> Opened {
        var opened: (plaintext: Data, epoch: Int)?
        for (epoch, identity) in keyring.identities.sorted(by: { $0.key > $1.key }) {
            if let plaintext = try? Age.decrypt(file, identities: [identity.ageIdentity]) {
                opened = (plaintext, epoch)
                break
            }
        }
        guard let (plaintext, epoch) = opened else {
            throw SempereError(
                .untrustedNote,
                "it does not open with any of this vault's keys this device holds (a key of a newer device list "
                    + "this device has not seen yet, or a file that is not a note)")
        }
        // Parsed as bytes: the trailer is ASCII, and the Markdown before it is signed as bytes.
        let marker = Data(("\n" + prefix).utf8)
        guard plaintext.hasSuffix(Data(" -->\n".utf8)),
            let start = plaintext.range(of: marker, options: .backwards)
        else {
            throw SempereError(.untrustedNote, "it has no author signature line, so it was not written by Sempere")
        }
        let markdownBytes = plaintext[..<start.lowerBound]
        // Split on bytes: String.split goes through grapheme breaking, 100 times slower on 4.5 KB.
        var fields: [String: String] = [:]
        for field in plaintext[start.upperBound..<(plaintext.endIndex - 5)].split(separator: UInt8(ascii: " ")) {
            guard let equals = field.firstIndex(of: UInt8(ascii: "=")) else { continue }
            fields[String(decoding: field[..<equals], as: UTF8.self)] = String(
                decoding: field[(equals + 1)...], as: UTF8.self)
        }
        guard let author = fields["author"], let claimed = fields["epoch"].flatMap({ Int($0) }),
            claimed == epoch, let signatureBytes = fields["signature"].flatMap({ Data(base64Encoded: $0) }),
            let signature = try? HybridSignature.Signature(rawRepresentation: signatureBytes)
        else {
            throw SempereError(
                .untrustedNote, "its author line is malformed, or names another epoch than the key that opens it")
        }
        // The signer is the author, and a note lives in its author's folder: a listed device that signs a note
        // for another device's path (overwriting that device's note) is set aside, never shown as that device's.
        let folder = path.split(separator: "/", omittingEmptySubsequences: false)
        guard folder.count == 3, folder[0] == "notes", folder[1] == author else {
            throw SempereError(
                .untrustedNote,
                "it is signed by device \(author.prefix(8)), not by the device whose folder holds it (each device "
                    + "writes only its own folder)")
        }
        let device = try authorRecord(
            author, epoch: epoch, path: path, file: file, vault: vault, lists: keyring.fileLists)
        guard let key = keyring.signingKeys[device.id],
            key.isValidSignature(
                signature,
                for: signedBytes(vaultID: vault.vaultID, path: path, epoch: epoch, markdown: Data(markdownBytes)),
                context: context)
        else {
            throw SempereError(
                .untrustedNote,
                "its signature does not verify under the key of \(device.name) (\(author.prefix(8))), whose note it "
                    + "claims to be: it was forged or altered")
        }
        return Opened(markdown: String(decoding: markdownBytes, as: UTF8.self), author: author, epoch: epoch)
    }

    /// A removed device's own notes that the vault did not record when it was removed (so the other
    /// devices set them aside): what it "had not synced". Each is opened with the identities the device
    /// still holds and must carry this device's own signature (the provider could encrypt a note to an
    /// old recipient too); the list rules no longer apply to a removed device.
    public static func unsynced(
        folder: VaultFolder, vault: VaultBody, credentials: DeviceKeys
    ) throws -> [(path: String, markdown: String)] {
        let identities = try VaultKeyring.ofRemovedDevice(vault: vault, credentials: credentials)
        // A list that is missing or altered counts as recording nothing: the device then saves more of its
        // own signed notes, never fewer.
        let lists = EpochFileLists(folder: folder)
        let recorded = Set(vault.records.flatMap { (try? lists.paths(record: $0, vaultID: vault.vaultID)) ?? [] })
        var saved: [(path: String, markdown: String)] = []
        let ownKey = credentials.signingKey.publicKey
        for path in try folder.notePaths()
        where path.hasPrefix("notes/\(credentials.id)/") && !recorded.contains(path) {
            let file = try folder.readNote(at: path)
            for (epoch, identity) in identities {
                guard let plaintext = try? Age.decrypt(file, identities: [identity.ageIdentity]) else { continue }
                // Only what this device itself signed: the provider can encrypt to an old recipient too.
                guard let (markdown, signature) = splitTrailer(plaintext, author: credentials.id, epoch: epoch),
                    ownKey.isValidSignature(
                        signature,
                        for: signedBytes(vaultID: vault.vaultID, path: path, epoch: epoch, markdown: markdown),
                        context: context)
                else { break }
                saved.append((path, String(decoding: markdown, as: UTF8.self)))
                break
            }
        }
        return saved
    }

    /// The Markdown bytes and signature of a note's plaintext when its signature line names `author` and
    /// `epoch`, else nil.
    static func splitTrailer(_ plaintext: Data, author: String, epoch: Int) -> (Data, HybridSignature.Signature)? {
        let expected = Data("\n\(prefix)author=\(author) epoch=\(epoch) signature=".utf8)
        guard plaintext.hasSuffix(Data(" -->\n".utf8)), let start = plaintext.range(of: expected, options: .backwards),
            let bytes = Data(base64Encoded: Data(plaintext[start.upperBound..<(plaintext.endIndex - 5)])),
            let signature = try? HybridSignature.Signature(rawRepresentation: bytes)
        else { return nil }
        return (Data(plaintext[..<start.lowerBound]), signature)
    }

    /// The device record that may have written a note of `epoch`; throws `.untrustedNote` saying why none may.
    static func authorRecord(
        _ author: String, epoch: Int, path: String, file: Data, vault: VaultBody, lists: EpochFileLists
    ) throws -> VaultBody.Device {
        // The generation at which the note's epoch ended (nil: it is the current epoch).
        let ended = vault.epochs.first { $0.number == epoch + 1 }?.startedIn
        if let device = vault.device(author) {
            // A listed device, added before the epoch ended.
            guard ended.map({ device.addedIn < $0 }) ?? true else {
                throw SempereError(
                    .untrustedNote,
                    "it names \(device.name) (\(author.prefix(8))) as its author in epoch \(epoch), which ended "
                        + "before that device was added")
            }
            return device
        }
        guard let removal = vault.removed.first(where: { $0.device.id == author }) else {
            throw SempereError(
                .untrustedNote,
                "its author, device \(author.prefix(8)), is not a device of this vault, listed or removed")
        }
        // A removed device keeps its old keys: only the notes recorded when the epoch ended are its.
        let digest = SHA256.hash(data: file).description
        var recorded = false
        if let ended, ended <= removal.removedIn, let record = vault.records.first(where: { $0.epoch == epoch }) {
            do {
                recorded = try lists.contains(path: path, sha256: digest, record: record, vaultID: vault.vaultID)
            } catch let error as SempereError {
                throw SempereError(
                    .untrustedNote,
                    "it was written by \(removal.device.name) (\(author.prefix(8))), since removed, and cannot be "
                        + "checked against the record of the notes that existed at its removal: \(error.reason)")
            }
        }
        guard recorded else {
            throw SempereError(
                .untrustedNote,
                "it was written by \(removal.device.name) (\(author.prefix(8))), which was removed from the vault "
                    + "(generation \(removal.removedIn)), and it is not among the notes that existed at its removal: "
                    + "written after the removal, or changed since (From Before a Device Change)")
        }
        return removal.device
    }
}

extension Data {
    fileprivate func hasSuffix(_ suffix: Data) -> Bool {
        count >= suffix.count && self[(endIndex - suffix.count)...] == suffix
    }
}
