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
///     <!-- sempere-note v2 author=<device_id> epoch=<n> version=<v> signature=<base64 HybridSignature> -->
///
/// The v2 signature covers vault_id ‖ 0x00 ‖ path ‖ 0x00 ‖ decimal epoch ‖ 0x00 ‖ decimal version ‖ 0x00 ‖
/// the Markdown bytes, with context "sempere/v2/note": a note cannot be moved to another path, epoch or
/// vault, nor passed off as another version of itself. A v1 line (sempere 0.2 and before) has no version
/// (read as version 0) and signs vault_id ‖ 0x00 ‖ path ‖ 0x00 ‖ epoch ‖ 0x00 ‖ Markdown, context
/// "sempere/v1/note".
///
/// The path signed is always the author's: `notes/<author>/<id>.age`. A copy home re-encrypted under a
/// newer key (Re-encrypt Everything) sits at `reencrypted/<author>/<id>.age` with the author's own
/// signature line unchanged, and opens only when home's re-encryption list binds its bytes to it
/// (``VaultKeyring/reencrypted``).
public enum VaultNote {
    static let contextV1 = Data("sempere/v1/note".utf8)
    static let context = Data("sempere/v2/note".utf8)
    static let contextV3 = Data("sempere/v3/note".utf8)
    static let prefixV1 = "<!-- sempere-note v1 "
    static let prefix = "<!-- sempere-note v2 "
    static let prefixV3 = "<!-- sempere-note v3 "
    /// Why a copy under a newer key than its signed epoch is set aside when no re-encryption list binds it
    /// (also how a listing knows such a copy of a re-encryption still under way).
    static let unboundCopyReason =
        "it is a re-encrypted copy that home's list of re-encrypted notes does not name (left over from a "
        + "re-encryption that stopped, or put there by someone else)"
    /// What both trailer versions start with.
    static let marker = Data("\n<!-- sempere-note v".utf8)

    public struct Opened: Sendable, Equatable {
        /// The Markdown; empty when the note was listed without its text (``VaultSession/list(withText:)``).
        public let markdown: String
        /// The first line, without its heading marks (kept when the text is not).
        public let title: String
        public let author: String
        /// The epoch the author signed the note in.
        public let epoch: Int
        /// The note's version: 1 when written, one more with each edit (0 for a note from before versions).
        public let version: Int
        /// The epoch whose key opens the file: the signed epoch, or a newer one for a copy home re-encrypted.
        public let keyEpoch: Int
        /// The versions of other devices' files of this note that this version replaces (device id → version),
        /// signed: empty for a note only its author has written (docs/sempere-format.md, "Editing any note").
        public let replaces: [String: Int]

        public init(
            markdown: String, author: String, epoch: Int, version: Int, keyEpoch: Int, title: String? = nil,
            replaces: [String: Int] = [:]
        ) {
            self.markdown = markdown
            self.title = title ?? VaultSession.title(of: markdown)
            self.author = author
            self.epoch = epoch
            self.version = version
            self.keyEpoch = keyEpoch
            self.replaces = replaces
        }
    }

    /// What the author signs (v2; `version` nil: the v1 form; `replaces` non-nil: the v3 form).
    static func signedBytes(
        vaultID: String, path: String, epoch: Int, version: Int?, replaces: String? = nil, markdown: Data
    ) -> Data {
        // (Markdown that is not valid UTF-8 cannot come from `seal`, which takes a String; the bytes are
        // what is signed either way.)
        var bytes = Data(vaultID.utf8) + Data([0]) + Data(path.utf8) + Data([0]) + Data(String(epoch).utf8) + Data([0])
        if let version { bytes += Data(String(version).utf8) + Data([0]) }
        if let replaces { bytes += Data(replaces.utf8) + Data([0]) }
        return bytes + markdown
    }

    /// The `replaces` field: `<device id>:<version>` pairs, sorted by device id, joined by commas.
    static func replacesField(_ replaces: [String: Int]) -> String {
        replaces.keys.sorted().map { "\($0):\(replaces[$0]!)" }.joined(separator: ",")
    }

    /// Parses a `replaces` field: nil unless every pair is a 32-hex device id (not `author`, each once) and a
    /// version of at least 0.
    static func parseReplaces(_ field: String, author: String) -> [String: Int]? {
        var replaces: [String: Int] = [:]
        for pair in field.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = pair.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, VaultFolder.isHexID(parts[0]), parts[0] != author,
                let version = Int(parts[1]), version >= 0, replaces[String(parts[0])] == nil
            else { return nil }
            replaces[String(parts[0])] = version
        }
        return replaces.isEmpty ? nil : replaces
    }

    /// The age file for `markdown` at `path` (this device's own folder), version `version`, written by
    /// `author` in the vault's current epoch, replacing the versions of other devices' files of the note in
    /// `replaces` (a v3 line; with none, the v2 line sempere 0.3 wrote).
    public static func seal(
        markdown: String, path: String, vault: VaultBody, author: DeviceKeys, version: Int = 1,
        replaces: [String: Int] = [:]
    ) throws -> Data {
        guard vault.device(author.id) != nil else {
            throw SempereError(.removed, "this device is not listed in the vault, so it cannot write notes")
        }
        precondition(replaces[author.id] == nil, "a version replaces only other devices' files")
        let epoch = vault.currentEpoch
        let body = Data(markdown.utf8)
        let field = replaces.isEmpty ? nil : replacesField(replaces)
        let signature = try author.signingKey.signature(
            for: signedBytes(
                vaultID: vault.vaultID, path: path, epoch: epoch.number, version: version, replaces: field,
                markdown: body),
            context: field == nil ? context : contextV3)
        let trailer =
            "\n\(field == nil ? prefix : prefixV3)author=\(author.id) epoch=\(epoch.number) version=\(version) "
            + (field.map { "replaces=\($0) " } ?? "")
            + "signature=\(signature.rawRepresentation.base64EncodedString()) -->\n"
        return try Age.encrypt(body + Data(trailer.utf8), to: [try VaultKeys.recipient(epoch.recipient)])
    }

    /// The author's path of a note file: itself, or for home's re-encrypted copy
    /// `reencrypted/<author>/<id>.age`, `notes/<author>/<id>.age`.
    public static func authorPath(_ path: String) -> String {
        path.hasPrefix("reencrypted/") ? "notes/" + path.dropFirst("reencrypted/".count) : path
    }

    /// Opens the note at `path` and checks who wrote it. Throws `.untrustedNote` for a note the provider
    /// (or a removed device after its removal) could have made: no trailer, a signature that fails, an
    /// author not listed during the note's epoch, an epoch other than the one whose key opens it (unless
    /// home's re-encryption list binds this very file), a note outside its signer's folder, or a removed
    /// device's note that is not in the record of the notes that existed when it was removed. The reason
    /// says which, without the path (callers name the note), and the error's ``SempereError/setAsideCategory``
    /// says where Repair lists it.
    public static func open(_ file: Data, path: String, vault: VaultBody, keyring: VaultKeyring) throws -> Opened {
        var opened: (plaintext: Data, epoch: Int)?
        for (epoch, identity) in keyring.identities.sorted(by: { $0.key > $1.key }) {
            if let plaintext = try? Age.decrypt(file, identities: [identity.ageIdentity]) {
                opened = (plaintext, epoch)
                break
            }
        }
        guard let (plaintext, keyEpoch) = opened else {
            throw SempereError(
                .untrustedNote,
                "it does not open with any of this vault's keys this device holds (a key of a newer device list "
                    + "this device has not seen yet, or a file that is not a note)", setAside: .cannotOpen)
        }
        guard let trailer = Trailer(plaintext) else {
            throw SempereError(
                .untrustedNote, "it has no author signature line, so it was not written by Sempere",
                setAside: .untrusted)
        }
        let authorPath = authorPath(path)
        let isCopy = authorPath != path
        guard trailer.epoch == keyEpoch || (isCopy && trailer.epoch < keyEpoch) else {
            throw SempereError(
                .untrustedNote, "its author line is malformed, or names another epoch than the key that opens it",
                setAside: trailer.epoch < keyEpoch ? .fromBeforeADeviceChange : .untrusted)
        }
        // A copy under a newer key than its author signed in: only home's list of what it re-encrypted vouches
        // for it (the epoch recipients are public, so anyone holding an old plaintext could make one).
        if isCopy {
            guard
                keyring.reencrypted.binds(
                    path: authorPath, sha256: SHA256.hash(data: file).description, epoch: keyEpoch)
            else {
                throw SempereError(.untrustedNote, unboundCopyReason, setAside: .untrusted)
            }
        }
        // The signer is the author, and a note lives in its author's folder: a listed device that signs a note
        // for another device's path (overwriting that device's note) is set aside, never shown as that device's.
        let folder = authorPath.split(separator: "/", omittingEmptySubsequences: false)
        guard folder.count == 3, folder[0] == "notes", folder[1] == trailer.author else {
            throw SempereError(
                .untrustedNote,
                "it is signed by device \(trailer.author.prefix(8)), not by the device whose folder holds it (each "
                    + "device writes only its own folder)", setAside: .untrusted)
        }
        let device = try authorRecord(
            trailer.author, epoch: trailer.epoch, path: authorPath, file: file, vault: vault, lists: keyring.fileLists,
            boundByHome: isCopy)
        guard let key = keyring.signingKeys[device.id],
            key.isValidSignature(
                trailer.signature, for: trailer.signedBytes(plaintext, vaultID: vault.vaultID, path: authorPath),
                context: trailer.context)
        else {
            throw SempereError(
                .untrustedNote,
                "its signature does not verify under the key of \(device.name) (\(trailer.author.prefix(8))), whose "
                    + "note it claims to be: it was forged or altered", setAside: .untrusted)
        }
        return Opened(
            markdown: String(decoding: plaintext[..<trailer.markdownEnd], as: UTF8.self), author: trailer.author,
            epoch: trailer.epoch, version: trailer.version, keyEpoch: keyEpoch, replaces: trailer.replaces)
    }

    /// A note's signature line, parsed as bytes (the trailer is ASCII; the Markdown before it is signed as
    /// bytes): nil when the plaintext has none, or one that does not parse.
    package struct Trailer {
        let markdownEnd: Data.Index
        let author: String
        let epoch: Int
        /// 0 for a v1 line.
        let version: Int
        let isV1: Bool
        /// Empty unless a v3 line.
        let replaces: [String: Int]
        let signature: HybridSignature.Signature

        /// The signature's context for this line's version.
        var context: Data {
            isV1 ? VaultNote.contextV1 : replaces.isEmpty ? VaultNote.context : VaultNote.contextV3
        }

        /// What the line's signature covers in `plaintext` at the author's `path`.
        func signedBytes(_ plaintext: Data, vaultID: String, path: String) -> Data {
            VaultNote.signedBytes(
                vaultID: vaultID, path: path, epoch: epoch, version: isV1 ? nil : version,
                replaces: replaces.isEmpty ? nil : VaultNote.replacesField(replaces),
                markdown: Data(plaintext[..<markdownEnd]))
        }

        package init?(_ plaintext: Data) {
            guard plaintext.hasSuffix(Data(" -->\n".utf8)),
                let start = plaintext.range(of: VaultNote.marker, options: .backwards),
                let space = plaintext[start.upperBound...].firstIndex(of: UInt8(ascii: " ")),
                space + 1 <= plaintext.endIndex - 5
            else { return nil }
            let kind = plaintext[start.upperBound..<space]
            guard kind.elementsEqual("1".utf8) || kind.elementsEqual("2".utf8) || kind.elementsEqual("3".utf8)
            else { return nil }
            isV1 = kind.elementsEqual("1".utf8)
            let isV3 = kind.elementsEqual("3".utf8)
            // Split on bytes: String.split goes through grapheme breaking, 100 times slower on 4.5 KB.
            var fields: [String: String] = [:]
            for field in plaintext[(space + 1)..<(plaintext.endIndex - 5)].split(separator: UInt8(ascii: " ")) {
                guard let equals = field.firstIndex(of: UInt8(ascii: "=")) else { continue }
                fields[String(decoding: field[..<equals], as: UTF8.self)] = String(
                    decoding: field[(equals + 1)...], as: UTF8.self)
            }
            guard let author = fields["author"], let epoch = fields["epoch"].flatMap({ Int($0) }), epoch >= 1,
                let bytes = fields["signature"].flatMap({ Data(base64Encoded: $0) }),
                let signature = try? HybridSignature.Signature(rawRepresentation: bytes)
            else { return nil }
            let version: Int
            if isV1 {
                version = 0
            } else {
                guard let parsed = fields["version"].flatMap({ Int($0) }), parsed >= 1 else { return nil }
                version = parsed
            }
            // A v3 line names at least one replaced version; a v2 line none.
            if isV3 {
                // Only the canonical form (sorted, plain decimal) is read: the signature covers that form.
                guard let field = fields["replaces"], let parsed = VaultNote.parseReplaces(field, author: author),
                    VaultNote.replacesField(parsed) == field
                else { return nil }
                replaces = parsed
            } else {
                replaces = [:]
            }
            self.markdownEnd = start.lowerBound
            self.author = author
            self.epoch = epoch
            self.version = version
            self.signature = signature
        }
    }

    /// A removed device's own notes whose file the vault did not record when it was removed (so the other
    /// devices set them aside): what it "had not synced", new notes and offline edits of older ones alike (a
    /// record lists each file's path with its SHA-256, so an edit made after the list is not in it). Each is
    /// opened with the identities the device still holds and must carry this device's own signature (the
    /// provider could encrypt a note to an old recipient too); the list rules no longer apply to a removed device.
    public static func unsynced(
        folder: VaultFolder, vault: VaultBody, credentials: DeviceKeys
    ) throws -> [(path: String, markdown: String)] {
        let identities = try VaultKeyring.ofRemovedDevice(vault: vault, credentials: credentials)
        // A list that is missing or altered counts as recording nothing: the device then saves more of its
        // own signed notes, never fewer.
        let lists = EpochFileLists(folder: folder)
        func recorded(_ path: String, _ file: Data) -> Bool {
            let sha256 = SHA256.hash(data: file).description
            return vault.records.contains {
                (try? lists.contains(path: path, sha256: sha256, record: $0, vaultID: vault.vaultID)) ?? false
            }
        }
        var saved: [(path: String, markdown: String)] = []
        for path in try folder.notePaths() where path.hasPrefix("notes/\(credentials.id)/") {
            let file = try folder.readNote(at: path)
            guard !recorded(path, file) else { continue }
            for (epoch, identity) in identities {
                guard let plaintext = try? Age.decrypt(file, identities: [identity.ageIdentity]) else { continue }
                // Only what this device itself signed: the provider can encrypt to an old recipient too.
                guard let own = signed(plaintext, by: credentials, path: path, vaultID: vault.vaultID),
                    own.epoch == epoch
                else { break }
                saved.append((path, own.markdown))
                break
            }
        }
        return saved
    }

    /// The Markdown, epoch, version and replaced versions of `plaintext` when its signature line is `keys`' own
    /// valid signature of it at `path` (the author's path), else nil.
    static func signed(
        _ plaintext: Data, by keys: DeviceKeys, path: String, vaultID: String
    ) -> (markdown: String, epoch: Int, version: Int, replaces: [String: Int])? {
        guard let trailer = Trailer(plaintext), trailer.author == keys.id,
            keys.signingKey.publicKey.isValidSignature(
                trailer.signature, for: trailer.signedBytes(plaintext, vaultID: vaultID, path: path),
                context: trailer.context)
        else { return nil }
        return (
            String(decoding: plaintext[..<trailer.markdownEnd], as: UTF8.self), trailer.epoch, trailer.version,
            trailer.replaces
        )
    }

    /// The device record that may have written a note of `epoch`; throws `.untrustedNote` saying why none may.
    /// `boundByHome`: the file is a copy home re-encrypted and bound (it checked the note when it did), so a
    /// removed author's record is not asked for.
    static func authorRecord(
        _ author: String, epoch: Int, path: String, file: Data, vault: VaultBody, lists: EpochFileLists,
        boundByHome: Bool = false
    ) throws -> VaultBody.Device {
        // The generation at which the note's epoch ended (nil: it is the current epoch).
        let ended = vault.epochs.first { $0.number == epoch + 1 }?.startedIn
        if let device = vault.device(author) {
            // A listed device, added before the epoch ended.
            guard ended.map({ device.addedIn < $0 }) ?? true else {
                throw SempereError(
                    .untrustedNote,
                    "it names \(device.name) (\(author.prefix(8))) as its author in epoch \(epoch), which ended "
                        + "before that device was added", setAside: .untrusted)
            }
            return device
        }
        guard let removal = vault.removed.first(where: { $0.device.id == author }) else {
            throw SempereError(
                .untrustedNote,
                "its author, device \(author.prefix(8)), is not a device of this vault, listed or removed",
                setAside: .untrusted)
        }
        if boundByHome { return removal.device }
        // A removed device keeps its old keys: only the notes recorded when the epoch ended are its.
        let digest = SHA256.hash(data: file).description
        var recorded = false
        if let ended, ended <= removal.removedIn, let record = vault.records.first(where: { $0.epoch == epoch }) {
            do {
                recorded = try lists.contains(path: path, sha256: digest, record: record, vaultID: vault.vaultID)
            } catch let error as SempereError where error.code == .notFound {
                // vault.json of the change has arrived and its list not yet: nothing is decided until it does.
                throw SempereError(
                    .untrustedNote,
                    "it was written by \(removal.device.name) (\(author.prefix(8))), since removed, and the record of "
                        + "the notes that existed at its removal (\(EpochFileList.path(epoch: epoch))) has not reached "
                        + "this device yet: waiting for sync", setAside: .waitingForSync)
            } catch let error as SempereError {
                throw SempereError(
                    .untrustedNote,
                    "it was written by \(removal.device.name) (\(author.prefix(8))), since removed, and cannot be "
                        + "checked against the record of the notes that existed at its removal: \(error.reason)",
                    setAside: .fromBeforeADeviceChange)
            }
        }
        guard recorded else {
            throw SempereError(
                .untrustedNote,
                "it was written by \(removal.device.name) (\(author.prefix(8))), which was removed from the vault "
                    + "(generation \(removal.removedIn)), and it is not among the notes that existed at its removal: "
                    + "written after the removal, or changed since", setAside: .fromBeforeADeviceChange)
        }
        return removal.device
    }
}

extension Data {
    fileprivate func hasSuffix(_ suffix: Data) -> Bool {
        count >= suffix.count && self[(endIndex - suffix.count)...] == suffix
    }
}
