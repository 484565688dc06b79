import Age
import Foundation
import SiblingsCrypto
import Synchronization

/// Re-encrypt Everything (the guide: "a separate, rare step that also replaces the recovery kit, for when
/// even old files must stop opening with old keys"; docs/sempere-format.md, "Re-encrypt Everything").
///
/// Home starts a new epoch (reason "reencrypt") by replacing the kit, at once when the current kit co-signs
/// and after the vault's delay otherwise (the rule of every kit replacement), then writes, for every note
/// under an older key, a copy under the new one beside the author's file (`reencrypted/<author>/<id>.age`):
/// the same plaintext, so the author's signature line, and so the author shown, are unchanged. The copies
/// are made durable in batches and journaled outside the vault, so a kill at any point loses nothing and
/// running it again goes on where it stopped. Last, `records/reencrypted-<m>.json` lists every copy with the
/// SHA-256 of the file it was made from, and vault.json commits to that list: from then on the copies are
/// the notes, and each author's device removes its old files on its next command (home removes those of
/// removed devices). Once they have, the old keys open no note in the folder.
extension VaultSession {
    /// Progress of a re-encryption: `done` of `total` notes, `bytes` of the copies written so far.
    public struct ReencryptProgress: Sendable {
        public let done: Int
        public let total: Int
        public let bytes: Int64
    }

    /// What Re-encrypt Everything did.
    public struct Reencrypted: Sendable {
        /// The new kit to print (nil when this call only went on with one started before); call
        /// ``kitShown()`` once it has been shown.
        public let kit: RecoveryKit?
        /// When the kit replacement waits for the vault's delay: when it and the re-encryption happen. Nil
        /// when the re-encryption ran.
        public let effectiveAt: Date?
        /// The epoch every note is now under.
        public let epoch: Int?
        /// How many notes were copied (this run and any it went on from).
        public let count: Int
        /// Files still under an old key, which their writers remove on their next command.
        public let waitingForRemoval: [String]
        /// True when the vault's current epoch is a finished re-encryption already: nothing was done.
        public var alreadyDone = false
    }

    /// The batch after which copies are made durable and journaled: a kill costs at most this many copies
    /// made again.
    static let reencryptBatch = 256

    /// On home: Re-encrypt Everything. Replaces the kit (at once with `currentKit`, which co-signs; else the
    /// replacement waits the vault's delay, and the re-encryption runs when it takes effect: run this again
    /// then) and re-encrypts every note under the new epoch's key. Run again after a crash or kill, it goes
    /// on with the re-encryption that was started (no second kit).
    public mutating func reencryptEverything(
        currentKit: RecoveryKit?, progress: (ReencryptProgress) -> Void = { _ in }
    ) throws -> Reencrypted {
        try checkHome()
        if unfinishedReencryption != nil { return try continueReencryption(kit: nil, progress: progress) }
        let current = body.currentEpoch.number
        if body.currentEpoch.reason == VaultHome.reencryptReason,
            body.reencryptions.contains(where: { $0.epoch == current })
        {
            // Done already, and no device change since (one would have started another epoch): a second run
            // would re-encrypt nothing. What a run stopped after committing left behind is tidied.
            try? FileManager.default.removeItem(at: state.reencryptJournalFile(root: configRoot, epoch: current))
            let listing = try list(withText: false)
            return Reencrypted(
                kit: nil, effectiveAt: nil, epoch: current, count: 0, waitingForRemoval: listing.waitingForRemoval,
                alreadyDone: true)
        }
        if let pending = body.kitReplacement {
            guard pending.reencrypt == true else {
                throw SempereError(
                    .alreadyExists,
                    "a replacement of the recovery kit is waiting for its delay: Re-encrypt Everything replaces the "
                        + "kit too, so run it once that one has taken effect")
            }
            return Reencrypted(
                kit: nil, effectiveAt: Date(timeIntervalSince1970: TimeInterval(pending.effectiveAt)), epoch: nil,
                count: 0, waitingForRemoval: [])
        }
        let existing = try existingNotesNow()
        let replaced = try VaultHome(credentials: keys).replaceKit(
            in: vault, currentKit: currentKit, existingNotes: existing, now: now, reencrypt: true)
        try UnshownKit.save(replaced.kit, root: configRoot, identity: keys.identity)
        if let list = replaced.fileList { try folder.write(list) }
        try publish(replaced.vault)
        if let effectiveAt = replaced.effectiveAt {
            return Reencrypted(kit: replaced.kit, effectiveAt: effectiveAt, epoch: nil, count: 0, waitingForRemoval: [])
        }
        return try continueReencryption(kit: replaced.kit, progress: progress)
    }

    /// Copies every note under an older key than the re-encryption's epoch, then commits the list.
    private mutating func continueReencryption(
        kit: RecoveryKit?, progress: (ReencryptProgress) -> Void
    ) throws -> Reencrypted {
        guard let epoch = unfinishedReencryption else {
            throw SempereError(.notFound, "no re-encryption is under way")
        }
        let journalFile = state.reencryptJournalFile(root: configRoot, epoch: epoch)
        let journal = ReencryptJournal.load(from: journalFile)
        let listing = try list(withText: false)
        let keyring = try keyring()
        let recipient = try VaultKeys.recipient(body.currentEpoch.recipient)
        // Every note shown under an older key, from the file shown (the author's, or an earlier copy).
        struct Source {
            let path: String
            let file: String
            let keyEpoch: Int
            /// The file's SHA-256, from the listing.
            let sha256: String
        }
        // The listing just saved the index: the files' digests are there (and it is this run's to keep up).
        var index = try NoteIndex.load(from: state.noteIndexFile(root: configRoot), identity: keys.identity)
        let folder = self.folder
        var sources: [Source] = []
        // Made before this run stopped, durable, journaled and in place: whether the note shows now or not (a
        // copy that replaced an earlier copy is not bound until the list is committed).
        var done = journal.entries.values.filter { entry in
            (try? folder.read(ReencryptionList.copyPath(of: entry.path))).map {
                SHA256.hash(data: $0).description == entry.sha256
            } ?? false
        }
        let journaled = Set(done.map(\.path))
        for note in listing.notes {
            guard note.keyEpoch < epoch, let sha = index.entries[note.file]?.sha256 else { continue }
            let copy = ReencryptionList.copyPath(of: note.path)
            if journaled.contains(note.path) { continue }
            if let entry = journal.entries[note.path], entry.sourceSHA256 == sha,
                let bytes = try? folder.read(VaultFolder.stagedPath(copy)),
                SHA256.hash(data: bytes).description == entry.sha256
            {
                // Durable and journaled, stopped before it was put in place.
                try folder.commitCopy(at: copy)
                done.append(entry)
                continue
            }
            sources.append(Source(path: note.path, file: note.file, keyEpoch: note.keyEpoch, sha256: sha))
        }
        let total = done.count + sources.count
        var bytes: Int64 = 0
        progress(ReencryptProgress(done: done.count, total: total, bytes: 0))
        // Each batch is made durable, journaled and put in place on the committer's thread while the next one is
        // being made (sync(2) waits for the disk, not for the processors).
        let committer = CopyCommitter(folder: folder, journal: journal, journalFile: journalFile)
        for start in stride(from: 0, to: sources.count, by: Self.reencryptBatch) {
            let batch = Array(sources[start..<min(start + Self.reencryptBatch, sources.count)])
            let made = CopySlots(count: batch.count)
            DispatchQueue.concurrentPerform(iterations: batch.count) { job in
                let source = batch[job]
                made.set(
                    job,
                    Result {
                        let file = try folder.readNote(at: source.file)
                        guard let identity = keyring.identities[source.keyEpoch] else {
                            throw SempereError(.notFound, "no key of epoch \(source.keyEpoch) on this device")
                        }
                        let plaintext = try Age.decrypt(file, identities: [identity.ageIdentity])
                        let copy = try Age.encrypt(plaintext, to: [recipient])
                        let staged = try folder.writeCopy(copy, at: ReencryptionList.copyPath(of: source.path))
                        return CopySlots.Made(
                            entry: ReencryptionList.Entry(
                                path: source.path, sha256: SHA256.hash(data: copy).description,
                                sourceSHA256: source.sha256), size: Int64(copy.count), staged: staged)
                    }.mapError { $0 as? SempereError ?? SempereError(.io, plainDescription(of: $0)) })
            }
            var entries: [ReencryptionList.Entry] = []
            var staged: [String] = []
            for job in batch.indices {
                switch made.get(job) {
                case .success(let copy):
                    entries.append(copy.entry)
                    if copy.staged { staged.append(ReencryptionList.copyPath(of: copy.entry.path)) }
                    bytes += copy.size
                case .failure(let error):
                    // What was made before is committed first (a later run keeps it).
                    try? committer.wait()
                    throw SempereError(
                        error.code,
                        "cannot re-encrypt \(batch[job].file): \(error.reason). Nothing is lost: run `sempere "
                            + "reencrypt` again to go on")
                }
            }
            try committer.commit(entries, staged: staged)
            done += entries
            progress(ReencryptProgress(done: done.count, total: total, bytes: bytes))
        }
        try committer.wait()
        // The copies' new names durable before the list that binds them.
        try folder.syncCopies()
        let copies = try ReencryptionList(vaultID: body.vaultID, epoch: epoch, notes: done)
        try folder.write(copies)
        try publish(try VaultHome(credentials: keys).finishReencryption(in: vault, epoch: epoch, list: copies))
        try? FileManager.default.removeItem(at: journalFile)
        let sourceFiles = Dictionary(
            listing.notes.map { (VaultNote.authorPath($0.file), $0.file) }, uniquingKeysWith: { $1 })
        // Home's own old files, and those of removed devices, go now (each the very file copied: what a listing
        // would find superseded), on their own threads while the index is saved; the other authors' on their
        // next command.
        let removed = Set(body.removed.map(\.device.id))
        var waiting: [String] = []
        var stale: [String] = []
        for entry in done {
            guard let source = sourceFiles[entry.path], VaultFolder.isNotePath(source) else { continue }
            let author = String(source.split(separator: "/")[1])
            guard author == keys.id || removed.contains(author) else {
                waiting.append(source)
                continue
            }
            // Unchanged since the listing hashed it (same stat), and that hash is the one copied.
            guard let hashed = index.entries[source], hashed.sha256 == entry.sourceSHA256, let stat = hashed.stat,
                folder.statKey(source) == stat
            else { continue }
            stale.append(source)
        }
        let removal = folder.removeNotes(stale)
        // Home just made each copy from a note it showed, and the list now binds it: its index learns the
        // copies as opening them would, so the next listing does not open 10,000 notes again.
        for entry in done {
            guard let source = sourceFiles[entry.path] else { continue }
            index.recordCopy(
                ReencryptionList.copyPath(of: entry.path), sha256: entry.sha256, of: source, keyEpoch: epoch,
                folder: folder)
        }
        try index.save(to: state.noteIndexFile(root: configRoot), identity: keys.identity)
        try removal.wait()
        return Reencrypted(
            kit: kit, effectiveAt: nil, epoch: epoch, count: done.count, waitingForRemoval: waiting.sorted())
    }
}

extension VaultHome {
    /// The reason of an epoch that Re-encrypt Everything started.
    public static let reencryptReason = "reencrypt"

    /// Commits a finished re-encryption: vault.json names its list by SHA-256 and count.
    func finishReencryption(in vault: SignedVault, epoch: Int, list: ReencryptionList) throws -> SignedVault {
        try next(vault) { body in
            body.reencryptions.append(
                VaultBody.Reencryption(
                    epoch: epoch, generation: body.generation, listSHA256: list.sha256, count: list.notes.count))
        }
    }
}

/// The copies a re-encryption has made durable: `<config>/vaults/<vault_id>.reencrypt-<m>.journal`, one line
/// per copy (`<author's path> <copy's SHA-256> <source's SHA-256>`), appended after each batch is synced.
/// Outside the vault (home's own bookkeeping); a line that does not parse is ignored (the copy is made again).
struct ReencryptJournal {
    var entries: [String: ReencryptionList.Entry] = [:]

    static func load(from url: URL) -> ReencryptJournal {
        var journal = ReencryptJournal()
        guard let data = FileManager.default.contents(atPath: url.path) else { return journal }
        for line in data.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
            guard fields.count == 3, VaultFolder.isNotePath(fields[0]), fields[1].count == 64, fields[2].count == 64
            else { continue }
            journal.entries[fields[0]] = ReencryptionList.Entry(
                path: fields[0], sha256: fields[1], sourceSHA256: fields[2])
        }
        return journal
    }

    mutating func append(_ new: [ReencryptionList.Entry], to url: URL) throws {
        guard !new.isEmpty else { return }
        let text = new.map { "\($0.path) \($0.sha256) \($0.sourceSHA256)\n" }.joined()
        do {
            if !FileManager.default.fileExists(atPath: url.path) {
                try AtomicWrite.write(Data(text.utf8), to: url, mode: 0o600)
            } else {
                let handle = try FileHandle(forWritingTo: url)
                defer { try? handle.close() }
                try handle.seekToEnd()
                try handle.write(contentsOf: Data(text.utf8))
                try handle.synchronize()
            }
        } catch let error as SempereError {
            throw error
        } catch {
            throw SempereError(.io, "cannot write \(url.path): \(plainDescription(of: error))")
        }
        for entry in new { entries[entry.path] = entry }
    }
}

/// Result slots filled by concurrent jobs, one slot each.
private final class CopySlots: Sendable {
    /// A copy written: its list entry, its size, and whether it went under a staged name.
    struct Made: Sendable {
        let entry: ReencryptionList.Entry
        let size: Int64
        let staged: Bool
    }
    private let slots: Mutex<[Result<Made, SempereError>?]>

    init(count: Int) { slots = Mutex(Array(repeating: nil, count: count)) }

    func set(_ index: Int, _ value: Result<Made, SempereError>) { slots.withLock { $0[index] = value } }
    func get(_ index: Int) -> Result<Made, SempereError> { slots.withLock { $0[index]! } }
}

/// Makes each batch of copies durable, journals it, and puts its staged copies in place, in that order, on a
/// thread of its own while the caller makes the next batch. A journaled copy is always whole on disk, and an
/// earlier copy a staged one replaces stays until then.
private final class CopyCommitter: @unchecked Sendable {
    // @unchecked: `journal` and `failure` are touched by one queued job at a time, and by the caller only after
    // waiting for it (the group orders them).
    private let queue = DispatchQueue(label: "sempere.reencrypt.commit")
    private let group = DispatchGroup()
    private let folder: VaultFolder
    private let journalFile: URL
    private var journal: ReencryptJournal
    private var failure: SempereError?

    init(folder: VaultFolder, journal: ReencryptJournal, journalFile: URL) {
        self.folder = folder
        self.journal = journal
        self.journalFile = journalFile
    }

    /// Waits for the batch before (throwing what it failed with), then starts committing this one.
    func commit(_ entries: [ReencryptionList.Entry], staged: [String]) throws {
        try wait()
        queue.async(group: group) { [self] in
            do {
                try folder.syncCopies()
                try journal.append(entries, to: journalFile)
                for path in staged { try folder.commitCopy(at: path) }
            } catch {
                failure = error as? SempereError ?? SempereError(.io, plainDescription(of: error))
            }
        }
    }

    /// Waits until every batch handed over is committed; throws the first failure.
    func wait() throws {
        group.wait()
        if let failure { throw failure }
    }
}
