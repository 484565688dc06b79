import Age
import Foundation
import SiblingsCrypto

/// A device's cache of the notes it has opened and checked, so that listing a vault of 10,000 notes
/// opens only the ones that changed (opening is ~0.4 ms a note: an X25519 unwrap and two signature
/// checks), and reads again only the files whose stat changed.
///
/// It lives outside the vault, beside the device's state, encrypted with age to the device's own
/// identity: it holds the notes' text. An entry is reused only when the file is unchanged (its SHA-256,
/// or, without reading it, its device, inode, size, modification and change times, which no sync client
/// or provider can set back all at once) and the parts of the device list the trust rules read are
/// unchanged (``trustFingerprint(of:)``: removals, epochs, records), so a cached answer is always the
/// answer `VaultNote.open` would give now. A list that only added or renamed devices keeps the accepted
/// notes; set-aside notes are checked again (one may come from the device just added).
public struct NoteIndex: Codable, Sendable {
    struct Entry: Codable, Sendable {
        var sha256: String
        /// The file's identity and times when it was hashed (``VaultFolder/statKey(_:)``): while they are
        /// unchanged the file is not read again.
        var stat: String?
        /// The text, for a note of at most ``textLimit`` bytes; a longer one keeps only its title and is opened
        /// again when its text is asked for.
        var markdown: String?
        var title: String?
        var author: String?
        var epoch: Int?
        var version: Int?
        var keyEpoch: Int?
        /// The other devices' versions the note replaces (nil: none).
        var replaces: [String: Int]?
        var setAside: String?
        /// The ``SetAsideCategory`` identifier of a set-aside entry.
        var category: String?
    }

    /// The longest text the index keeps (64 KiB): the index is read and written whole, so at 10,000 notes of
    /// 100 KiB keeping every text would make every listing read and write a gigabyte.
    static let textLimit = 64 * 1024

    /// The trust fingerprint of the vault body the entries were checked under.
    var trustSHA256: String
    /// The parts of that fingerprint, so that a later body that only extends the history (a new epoch and a
    /// record, with no device removed: Make Home, a kit replacement, Re-encrypt Everything) keeps the notes
    /// accepted: none of them can turn an accepted note into a set-aside one.
    var trustParts: TrustParts?
    var entries: [String: Entry]
    /// The highest version of each note (by its author's path) this device has shown: a lower one later is
    /// an old version put back. Kept when the entries are dropped for a new trust fingerprint.
    var seen: [String: Int]?
    /// How many notes the last `refresh` had to open (the rest came from the index).
    public private(set) var openedInLastRefresh = 0
    /// Whether the last `refresh` changed any entry (else the index need not be saved again).
    public private(set) var changedInLastRefresh = true

    enum CodingKeys: String, CodingKey {
        case trustSHA256 = "trust_sha256", trustParts = "trust_parts", entries, seen
    }

    struct TrustParts: Codable, Equatable {
        /// SHA-256 of the vault id and the removed devices.
        var base: String
        /// Each epoch's number, start and recipient.
        var epochs: [String]
        /// SHA-256 of each record.
        var records: [String]

        init(of body: VaultBody) throws {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            base = SHA256.hash(data: Data(body.vaultID.utf8) + (try encoder.encode(body.removed))).description
            epochs = body.epochs.map { "\($0.number):\($0.startedIn):\($0.recipient)" }
            records = try body.records.map { SHA256.hash(data: try encoder.encode($0)).description }
        }

        /// Whether `newer` is this history with epochs and records added, and no device removed since.
        func isExtended(by newer: TrustParts) -> Bool {
            newer.base == base && newer.epochs.starts(with: epochs) && newer.records.starts(with: records)
        }
    }

    public init() {
        trustSHA256 = ""
        entries = [:]
        seen = [:]
    }

    /// SHA-256 over what can turn an accepted note into a set-aside one: the vault id, the removed
    /// devices, the epochs (number, start, recipient) and the records. Adding or renaming a device
    /// changes none of it, and neither does a finished re-encryption: its list only binds copies, which
    /// were set aside (and so are checked again) until then.
    static func trustFingerprint(of body: VaultBody) throws -> String {
        struct Trust: Encodable {
            let vaultID: String
            let removed: [VaultBody.Removal]
            let epochs: [[String]]
            let records: [VaultBody.Record]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let trust = Trust(
            vaultID: body.vaultID, removed: body.removed,
            epochs: body.epochs.map { [String($0.number), String($0.startedIn), $0.recipient] }, records: body.records)
        return SHA256.hash(data: try encoder.encode(trust)).description
    }

    /// The index at `url`, or an empty one when there is none or it does not open (it is only a cache).
    ///
    /// - Throws: ``SempereError/Code/keyUnavailable`` when the device's key could not be used (``DeviceLocalFile``).
    public static func load(from url: URL, identity: any DeviceUnwrapKey) throws -> NoteIndex {
        guard let plaintext = try DeviceLocalFile.open(url, identity: identity),
            let index = try? JSONDecoder().decode(NoteIndex.self, from: plaintext)
        else { return NoteIndex() }
        return index
    }

    /// Records that home's re-encrypted copy at `copy` (its bytes' SHA-256 `sha256`), just bound, holds the
    /// note that the entry at `source` holds, under `keyEpoch`'s key: what opening it would find, without
    /// opening it. Only when `source` has an accepted entry and the copy can be stat'ed.
    mutating func recordCopy(_ copy: String, sha256: String, of source: String, keyEpoch: Int, folder: VaultFolder) {
        guard var entry = entries[source], entry.setAside == nil, entry.author != nil,
            let stat = folder.statKey(copy)
        else { return }
        entry.sha256 = sha256
        entry.stat = stat
        entry.keyEpoch = keyEpoch
        entries[copy] = entry
    }

    /// Saves the index encrypted to `identity`'s recipient, atomically, readable only by its owner.
    public func save(to url: URL, identity: any DeviceUnwrapKey) throws {
        let plaintext = try JSONEncoder().encode(self)
        try AtomicWrite.write(try Age.encrypt(plaintext, to: [identity.recipient]), to: url, mode: 0o600)
    }

    /// Every note file in `folder` (the authors' files and home's re-encrypted copies), opened and checked,
    /// reusing what is unchanged; the index is updated. Changed notes are opened on all cores.
    ///
    /// With `needText` false, a note longer than ``textLimit`` comes back with its title and an empty text
    /// (what a listing of titles needs); with it true, such notes are opened again for their text.
    public mutating func refresh(
        folder: VaultFolder, vault: SignedVault, keyring: VaultKeyring, needText: Bool = true
    ) throws -> [(path: String, result: Result<VaultNote.Opened, SempereError>)] {
        let fingerprint = try Self.trustFingerprint(of: vault.body)
        let parts = try TrustParts(of: vault.body)
        let countBefore = entries.count
        let fingerprintBefore = trustSHA256
        if trustSHA256 != fingerprint && !(trustParts?.isExtended(by: parts) ?? false) {
            trustSHA256 = fingerprint
            trustParts = parts
            entries = [:]
        } else {
            trustSHA256 = fingerprint
            trustParts = parts
            entries = entries.filter { $0.value.setAside == nil }
        }
        var changed = entries.count != countBefore || fingerprintBefore != fingerprint
        let paths = try folder.notePaths() + folder.copyPaths()
        // A file whose device, inode, size, modification and change times are those it had when it was
        // hashed is not read again (as git's index does): the change time cannot be set back by a sync
        // client or the provider, so a rewritten file always shows.
        let stats = paths.map { folder.statKey($0) }
        let unchanged = paths.indices.map { index in
            stats[index] != nil && entries[paths[index]]?.stat == stats[index] && entries[paths[index]]?.setAside == nil
                && !(needText && entries[paths[index]]?.markdown == nil)
        }
        // A file that cannot be read is set aside with the reason; it does not stop the others being listed.
        var unreadable: [String: String] = [:]
        let files = paths.indices.map { index -> Data in
            if unchanged[index] { return Data() }
            do {
                return try folder.readNote(at: paths[index])
            } catch _ {
                unreadable[paths[index]] =
                    "it cannot be read: check its permissions, whether it is a link to a file that is gone, or "
                    + "whether the sync client is still writing it"
                return Data()
            }
        }
        for (path, reason) in unreadable {
            entries[path] = Entry(sha256: "", setAside: reason, category: SetAsideCategory.cannotOpen.identifier)
        }
        let digests = paths.indices.map { index in
            unchanged[index] ? entries[paths[index]]!.sha256 : SHA256.hash(data: files[index]).description
        }
        for index in paths.indices where !unchanged[index] && unreadable[paths[index]] == nil {
            // Same bytes as before (touched, or copied back): keep the entry, with the new stat.
            if entries[paths[index]]?.sha256 == digests[index] { entries[paths[index]]?.stat = stats[index] }
        }
        let stale = paths.indices.filter {
            unreadable[paths[$0]] == nil
                && (entries[paths[$0]]?.sha256 != digests[$0] || (needText && entries[paths[$0]]?.markdown == nil))
        }
        openedInLastRefresh = stale.count
        // Open the changed notes on all cores: each job writes only its own slot.
        let opened = Slots<Result<VaultNote.Opened, SempereError>>(count: stale.count)
        DispatchQueue.concurrentPerform(iterations: stale.count) { job in
            let index = stale[job]
            do {
                opened.set(
                    job,
                    .success(try VaultNote.open(files[index], path: paths[index], vault: vault.body, keyring: keyring)))
            } catch let error as SempereError {
                opened.set(job, .failure(error))
            } catch {
                opened.set(
                    job,
                    .failure(
                        SempereError(
                            .untrustedNote, "it does not open: \(plainDescription(of: error))", setAside: .cannotOpen)))
            }
        }
        var fresh: [String: VaultNote.Opened] = [:]
        for (job, index) in stale.enumerated() {
            let digest = digests[index]
            switch opened.get(job)! {
            case .success(let note):
                fresh[paths[index]] = note
                entries[paths[index]] = Entry(
                    sha256: digest, stat: stats[index],
                    markdown: note.markdown.utf8.count <= Self.textLimit ? note.markdown : nil, title: note.title,
                    author: note.author, epoch: note.epoch, version: note.version, keyEpoch: note.keyEpoch,
                    replaces: note.replaces.isEmpty ? nil : note.replaces)
            case .failure(let error):
                entries[paths[index]] = Entry(
                    sha256: digest, stat: stats[index], setAside: error.reason,
                    category: (error.setAsideCategory ?? .untrusted).identifier)
            }
        }
        let present = Set(paths)
        let countKept = entries.count
        entries = entries.filter { present.contains($0.key) }
        changed = changed || entries.count != countKept || unchanged.contains(false)
        changedInLastRefresh = changed
        return paths.map { path in
            if let note = fresh[path] { return (path, .success(note)) }
            let entry = entries[path]!
            if let author = entry.author, let epoch = entry.epoch,
                let text = entry.markdown ?? entry.title.map({ _ in "" })
            {
                return (
                    path,
                    .success(
                        VaultNote.Opened(
                            markdown: text, author: author, epoch: epoch, version: entry.version ?? 0,
                            keyEpoch: entry.keyEpoch ?? epoch, title: entry.title, replaces: entry.replaces ?? [:]))
                )
            }
            return (
                path,
                .failure(
                    SempereError(
                        .untrustedNote, entry.setAside ?? "it was set aside",
                        setAside: entry.category.flatMap(SetAsideCategory.init(identifier:)) ?? .untrusted))
            )
        }
    }
}
