import Foundation
import SiblingsCrypto
import Synchronization
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// A vault on disk: a folder that any sync provider carries (docs/sempere-format.md, "Files").
///
/// ```
/// vault.json                          written only by home
/// notes/<device_id>/<note_id>.age     each device writes only its own folder
/// requests/<request_id>.json          each joining device writes only its own request
/// records/epoch-<n>.json              written only by home: the notes that existed when epoch n ended
/// records/reencrypted-<m>.json        written only by home: the copies Re-encrypt Everything made
/// reencrypted/<author>/<note_id>.age  written only by home: notes re-encrypted under a newer key
/// manifests/<device_id>.json          each device writes only its own: its notes and their versions
/// recovery.age                        the optional passphrase copy of the recovery key
/// ```
///
/// Every write is atomic (temporary file, fsync, rename). Anything else in the folder, such as the
/// copies a provider makes when two writes race ("vault (conflicted copy …).json",
/// "….sync-conflict-….age", "note (1).age"), is never read as a vault or a note and never deleted: it is
/// reported by ``setAside()`` for Repair.
public struct VaultFolder: Sendable {
    public let url: URL
    /// `url.path`, computed once: the per-note calls (``statKey(_:)``) join strings, not URLs.
    let path: String

    public init(url: URL) {
        self.url = url
        path = url.path
    }

    public static let vaultFile = "vault.json"
    public static let recoveryFile = "recovery.age"

    /// Creates the folder layout for a new vault (the folder itself may exist, empty or not).
    public func create() throws {
        for folder in [url, url.appendingPathComponent("notes"), url.appendingPathComponent("requests")] {
            do {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            } catch {
                throw SempereError(.io, "cannot create \(folder.path): \(plainCreateFailure(at: folder, error))")
            }
        }
    }

    // MARK: vault.json

    /// Writes vault.json (home only).
    public func write(_ vault: SignedVault) throws {
        try AtomicWrite.write(try vault.encoded(), to: url.appendingPathComponent(Self.vaultFile), mode: 0o644)
    }

    /// vault.json as it is, not yet trusted (what a joining device looks at before the words).
    public func unverifiedVault() throws -> SignedVault {
        try SignedVault(parsing: try read(Self.vaultFile))
    }

    /// The vault this device follows: of vault.json and every copy of it a provider made, the one that
    /// `SignedVault.accept(pinned:now:)` takes that is newest, by takeover generation first (a takeover beats
    /// any list of the home before it, whatever its generation), then by generation. The other candidates
    /// and why each was refused are returned too, so a rollback or fork is shown, not hidden.
    public func vault(
        pinned: VaultPin, now: Date = Date()
    ) throws -> (vault: SignedVault, pin: VaultPin, refused: [(String, SempereError)]) {
        var best: (SignedVault, VaultPin)?
        var refused: [(String, SempereError)] = []
        var primaryError: SempereError?
        for name in try vaultCandidates() {
            do {
                let vault = try SignedVault(parsing: try read(name))
                let pin = try vault.accept(pinned: pinned, now: now)
                if best == nil
                    || (pin.takeoverGeneration, pin.generation) > (best!.1.takeoverGeneration, best!.1.generation)
                {
                    best = (vault, pin)
                }
            } catch let error as SempereError {
                refused.append((name, error))
                if name == Self.vaultFile { primaryError = error }
            }
        }
        guard let (vault, pin) = best else {
            throw primaryError ?? refused.first?.1
                ?? SempereError(.notFound, "\(url.path) has no vault.json: is this the vault folder?")
        }
        return (vault, pin, refused)
    }

    /// vault.json and the files a provider may have made from it.
    func vaultCandidates() throws -> [String] {
        try names(in: "").filter { $0 == Self.vaultFile || ($0.hasPrefix("vault") && $0.hasSuffix(".json")) }.sorted()
    }

    /// Writes the passphrase copy of the recovery key (recovery.age; `RecoveryKit.passphraseCopy`).
    public func writeRecoveryCopy(_ file: Data) throws {
        try AtomicWrite.write(file, to: url.appendingPathComponent(Self.recoveryFile), mode: 0o644)
    }

    // MARK: Notes

    /// The path of a note: notes/<device_id>/<note_id>.age.
    public static func notePath(author: String, noteID: String) -> String { "notes/\(author)/\(noteID).age" }

    /// A fresh note id (16 random bytes, hex).
    public static func newNoteID() -> String { SecureRandom.bytes(count: 16).hexString }

    /// Writes a note's file (each device writes only under its own id).
    public func writeNote(_ file: Data, at path: String) throws {
        guard Self.isNotePath(path) else {
            throw SempereError(.notFound, "\(path) is not a note path (notes/<device_id>/<note_id>.age)")
        }
        let target = url.appendingPathComponent(path)
        try Self.createFolder(target.deletingLastPathComponent())
        try AtomicWrite.write(file, to: target, mode: 0o644)
    }

    public func readNote(at path: String) throws -> Data { try read(path) }

    /// Removes a note's file (its author only), or home's copy of one; one already gone is fine.
    public func removeNote(at path: String) throws {
        guard Self.isNotePath(path) || Self.isCopyPath(path) else {
            throw SempereError(.notFound, "\(path) is not a note path")
        }
        try removeFile(path)
    }

    /// Removes any file of the folder (a set-aside one, after the person said so); one already gone is fine.
    func removeFile(_ path: String) throws {
        guard !path.split(separator: "/").contains(".."), !path.hasPrefix("/") else {
            throw SempereError(.notFound, "\(path) is not a path inside the vault")
        }
        guard unlink(self.path + "/" + path) == 0 || errno == ENOENT else {
            if errno == EISDIR || errno == EPERM {
                do {
                    try FileManager.default.removeItem(at: url.appendingPathComponent(path))
                    return
                } catch {
                    throw SempereError(.io, "cannot remove \(path): \(plainDescription(of: error))")
                }
            }
            throw SempereError(.io, "cannot remove \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Writes home's re-encrypted copy of the note at `reencrypted/<author>/<id>.age`, not flushed: home makes
    /// a batch durable at once (``syncCopies()``) and journals it. When no file is at that path yet, the copy is
    /// written there directly (nothing binds it until home's list names it, and a listing takes an unbound or
    /// half-written copy of a re-encryption under way for one still being made). When a file is there (an
    /// earlier copy this one replaces, or one a stopped run wrote), the copy goes under a staged name beside it
    /// (`.<id>.age.staged`, which listings ignore) and is put in place by ``commitCopy(at:)`` only once durable
    /// and journaled, so an earlier copy is never gone before its replacement is safe. Returns true when staged.
    func writeCopy(_ file: Data, at path: String) throws -> Bool {
        guard Self.isCopyPath(path) else {
            throw SempereError(.notFound, "\(path) is not a re-encrypted copy's path")
        }
        let final = url.appendingPathComponent(path)
        try Self.createFolder(final.deletingLastPathComponent())
        // One file operation per copy (no temporary file and rename): 10,000 of them share one folder's lock.
        var staged = false
        var target = final.path
        var descriptor = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        if descriptor < 0 && errno == EEXIST {
            staged = true
            target = url.appendingPathComponent(Self.stagedPath(path)).path
            descriptor = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
        }
        guard descriptor >= 0 else {
            throw SempereError(.io, "cannot create \(target): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var written = 0
        let failed = file.withUnsafeBytes { buffer -> Bool in
            while written < buffer.count {
                let count = retryingInterrupts {
                    Glibc.write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                }
                if count < 0 { return true }
                written += count
            }
            return false
        }
        guard !failed else {
            throw SempereError(
                .io, "cannot write \(target): \(String(cString: strerror(errno))) (is the disk full?)")
        }
        return staged
    }

    /// Puts a staged copy in place.
    func commitCopy(at path: String) throws {
        guard rename(self.path + "/" + Self.stagedPath(path), self.path + "/" + path) == 0 else {
            throw SempereError(
                .io, "cannot put the re-encrypted copy \(path) in place: \(String(cString: strerror(errno)))")
        }
    }

    /// The staged name of the copy at `path`: `reencrypted/<author>/.<id>.age.staged`.
    static func stagedPath(_ path: String) -> String {
        let url = URL(fileURLWithPath: path)
        return url.deletingLastPathComponent().relativePath + "/." + url.lastPathComponent + ".staged"
    }

    /// Makes every copy written since durable.
    func syncCopies() throws { try AtomicWrite.syncFileSystem(containing: url) }

    /// Starts removing note files (``removeNote(at:)``) on several threads, and returns at once; call
    /// ``Removal/wait()`` for the outcome. unlink(2) mostly waits, for the filesystem's journal and, where it is
    /// mounted with `discard`, for the freed blocks' discard, so eight at once overlap their waits: on this
    /// project's VM, 10,000 files of 100 KiB took 1.5 s one by one and 0.66 s eight at a time.
    func removeNotes(_ paths: [String], threads: Int = 8) -> Removal {
        let removal = Removal()
        let folder = self
        let count = min(threads, paths.count)
        for worker in 0..<count {
            removal.group.enter()
            Thread {
                defer { removal.group.leave() }
                for index in stride(from: worker, to: paths.count, by: count) {
                    do { try folder.removeNote(at: paths[index]) } catch {
                        removal.failed(error as? SempereError ?? SempereError(.io, plainDescription(of: error)))
                    }
                }
            }.start()
        }
        return removal
    }

    /// Removals under way on their own threads (``removeNotes(_:threads:)``).
    final class Removal: Sendable {
        fileprivate let group = DispatchGroup()
        private let failure = Mutex<SempereError?>(nil)

        fileprivate func failed(_ error: SempereError) { failure.withLock { $0 = $0 ?? error } }

        /// Waits for every removal; throws the first that failed.
        func wait() throws {
            group.wait()
            if let error = failure.withLock({ $0 }) { throw error }
        }
    }

    // MARK: Manifests

    /// Writes this device's manifest (``NoteManifest``; each device writes only its own).
    func write(manifest file: Data, device: String) throws {
        let target = url.appendingPathComponent(NoteManifest.path(device: device))
        try Self.createFolder(target.deletingLastPathComponent())
        try AtomicWrite.write(file, to: target, mode: 0o644)
    }

    /// A device's manifest file as it is in the folder, nil when there is none.
    func manifestFile(device: String) -> Data? {
        FileManager.default.contents(atPath: url.appendingPathComponent(NoteManifest.path(device: device)).path)
    }

    /// Every note file in the layout, sorted (the authors' files, not home's re-encrypted copies).
    public func notePaths() throws -> [String] {
        try noteFiles(withStat: false).map(\.path)
    }

    /// Every re-encrypted copy home wrote (`reencrypted/<author>/<note_id>.age`), sorted.
    public func copyPaths() throws -> [String] {
        try noteFiles(withStat: false, in: "reencrypted").map(\.path)
    }

    /// Every note file's path under `root` ("notes", or "reencrypted" for home's copies), sorted, with its
    /// ``statKey(_:)`` when `withStat` (nil if it cannot be stat'ed): one directory read per device folder,
    /// each file stat'ed relative to its folder (`fstatat`), so that listing 10,000 notes builds no full path
    /// per file.
    func noteFiles(withStat: Bool, in root: String = "notes") throws -> [(path: String, stat: String?)] {
        var files: [(path: String, stat: String?)] = []
        for device in try entries(in: root) where device.isDirectory && Self.isHexID(Substring(device.name)) {
            let prefix = root + "/" + device.name + "/"
            let folder = self.path + "/" + prefix
            guard let directory = opendir(folder) else {
                if errno == ENOENT || errno == ENOTDIR { continue }
                throw SempereError(.io, "cannot list \(folder): \(String(cString: strerror(errno)))")
            }
            defer { closedir(directory) }
            let descriptor = dirfd(directory)
            while let entry = readdir(directory) {
                let type = entry.pointee.d_type
                var info = stat()
                // Follows links, as reading the note does; a link or an unknown type is stat'ed to learn it.
                let stated = withUnsafePointer(to: entry.pointee.d_name) { name in
                    name.withMemoryRebound(to: CChar.self, capacity: 256) { name in
                        (withStat || (type != UInt8(DT_REG) && type != UInt8(DT_DIR)))
                            && fstatat(descriptor, name, &info, 0) == 0
                    }
                }
                if type == UInt8(DT_DIR) || (stated && (info.st_mode & S_IFMT) == S_IFDIR) { continue }
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
                }
                let base = Substring(name)
                guard base.utf8.count == 36, base.hasSuffix(".age"), Self.isHexID(base.dropLast(4)) else { continue }
                files.append((prefix + name, withStat && stated ? Self.statKey(info) : nil))
            }
        }
        return files.sorted { $0.path < $1.path }
    }

    /// The names in a subfolder and whether each is a folder (following links), without the writers'
    /// temporary files; empty when the subfolder does not exist.
    func entries(in subfolder: String) throws -> [(name: String, isDirectory: Bool)] {
        let folder = subfolder.isEmpty ? url : url.appendingPathComponent(subfolder)
        guard let directory = opendir(folder.path) else {
            if errno == ENOENT || errno == ENOTDIR { return [] }
            throw SempereError(.io, "cannot list \(folder.path): \(String(cString: strerror(errno)))")
        }
        defer { closedir(directory) }
        var result: [(name: String, isDirectory: Bool)] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name.hasPrefix(".") { continue }
            let type = entry.pointee.d_type
            let isDirectory: Bool
            if type == UInt8(DT_DIR) {
                isDirectory = true
            } else if type == UInt8(DT_REG) {
                isDirectory = false
            } else {
                // A link or an unknown type: ask the file system, following the link.
                isDirectory = isFolder(subfolder.isEmpty ? name : "\(subfolder)/\(name)")
            }
            result.append((name, isDirectory))
        }
        return result
    }

    /// The notes that exist now, with the SHA-256 of each file: what a removal records.
    public func noteReferences() throws -> [VaultBody.NoteReference] {
        try notePaths().map { path in
            VaultBody.NoteReference(path: path, sha256: SHA256.hash(data: try read(path)).description)
        }
    }

    static func isNotePath(_ path: String, root: String = "notes") -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == root, isHexID(parts[1]), parts[2].hasSuffix(".age") else { return false }
        return isHexID(parts[2].dropLast(4))
    }

    /// Whether `path` is a copy home re-encrypted, `reencrypted/<author>/<note_id>.age`.
    static func isCopyPath(_ path: String) -> Bool { isNotePath(path, root: "reencrypted") }

    static func isHexID(_ text: Substring) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// Creates `folder` and its parents, saying in words why not.
    static func createFolder(_ folder: URL) throws {
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw SempereError(.io, "cannot create \(folder.path): \(plainCreateFailure(at: folder, error))")
        }
    }

    // MARK: Records

    /// Writes an epoch's file list (home only, before the vault.json that commits to it).
    public func write(_ list: EpochFileList) throws {
        let target = url.appendingPathComponent(EpochFileList.path(epoch: list.epoch))
        try Self.createFolder(target.deletingLastPathComponent())
        try AtomicWrite.write(list.bytes, to: target, mode: 0o644)
    }

    /// Writes a re-encryption's list of copies (home only, before the vault.json that commits to it).
    public func write(_ list: ReencryptionList) throws {
        let target = url.appendingPathComponent(ReencryptionList.path(epoch: list.epoch))
        try Self.createFolder(target.deletingLastPathComponent())
        try AtomicWrite.write(list.bytes, to: target, mode: 0o644)
    }

    // MARK: Join requests

    public func write(_ request: JoinRequest) throws {
        // Made here too: sync tools that carry only files (git, some S3 mirrors) drop the empty requests/.
        try Self.createFolder(url.appendingPathComponent("requests"))
        try AtomicWrite.write(
            try request.encoded(), to: url.appendingPathComponent("requests/\(request.body.requestID).json"),
            mode: 0o644)
    }

    /// Removes this device's own join request once it has joined (its writer is the only one that may).
    public func removeRequest(_ request: JoinRequest) throws {
        let file = url.appendingPathComponent("requests/\(request.body.requestID).json")
        // Gone already (removed before, or only a provider's copy of it was read): nothing to do.
        guard FileManager.default.fileExists(atPath: file.path) else { return }
        do {
            try FileManager.default.removeItem(at: file)
        } catch {
            throw SempereError(.io, "cannot remove \(file.path): \(plainDescription(of: error))")
        }
    }

    /// The join requests that parse and carry a valid self-signature.
    public func requests() throws -> [JoinRequest] {
        try names(in: "requests").filter { $0.hasSuffix(".json") }.compactMap { name in
            try? JoinRequest(parsing: try read("requests/\(name)"))
        }
    }

    // MARK: Everything else

    /// Files that are not part of the layout (conflict copies, strays): never read, never deleted.
    public func setAside() throws -> [String] {
        var strays: [String] = []
        for name in try names(in: "")
        where ![Self.vaultFile, Self.recoveryFile, "notes", "requests", "records", "reencrypted", "manifests"].contains(
            name)
        {
            strays.append(name)
        }
        for root in ["notes", "reencrypted"] {
            for device in try names(in: root) {
                guard Self.isHexID(Substring(device)), isFolder("\(root)/\(device)") else {
                    strays.append("\(root)/\(device)")
                    continue
                }
                for name in try names(in: "\(root)/\(device)") {
                    let path = "\(root)/\(device)/\(name)"
                    // A folder named like a note is not a note either.
                    if !Self.isNotePath(path, root: root) || isFolder(path) { strays.append(path) }
                }
            }
        }
        for name in try names(in: "manifests") {
            let id = name.hasSuffix(".json") ? Substring(name.dropLast(5)) : ""
            if !Self.isHexID(id) || isFolder("manifests/\(name)") { strays.append("manifests/\(name)") }
        }
        return strays.sorted()
    }

    /// The device, inode, size, modification and change time (nanoseconds) of the file at `path`, following
    /// links; nil when it cannot be read. Equal keys mean the file was not written in between.
    func statKey(_ path: String) -> String? {
        var info = stat()
        guard stat(self.path + "/" + path, &info) == 0 else { return nil }
        return Self.statKey(info)
    }

    /// The modification time in a ``statKey(_:)``.
    static func modificationDate(statKey: String) -> Date? {
        let fields = statKey.split(separator: ":")
        guard fields.count == 5 else { return nil }
        let parts = fields[3].split(separator: ".")
        guard parts.count == 2, let seconds = Int64(parts[0]), let nanoseconds = Int64(parts[1]) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds) + TimeInterval(nanoseconds) / 1e9)
    }

    static func statKey(_ info: stat) -> String {
        // "dev:ino:size:mtime.nsec:ctime.nsec", in decimal, built without string interpolation (10,000 a command).
        var key: [UInt8] = []
        key.reserveCapacity(96)
        func decimal(_ value: some BinaryInteger, then separator: UInt8?) {
            var rest = UInt64(value.magnitude)
            if value < 0 { key.append(UInt8(ascii: "-")) }
            let start = key.count
            repeat {
                key.append(UInt8(ascii: "0") + UInt8(rest % 10))
                rest /= 10
            } while rest > 0
            key[start...].reverse()
            if let separator { key.append(separator) }
        }
        let (colon, dot) = (UInt8(ascii: ":"), UInt8(ascii: "."))
        decimal(UInt64(info.st_dev), then: colon)
        decimal(UInt64(info.st_ino), then: colon)
        decimal(Int64(info.st_size), then: colon)
        decimal(Int64(info.st_mtim.tv_sec), then: dot)
        decimal(Int64(info.st_mtim.tv_nsec), then: colon)
        decimal(Int64(info.st_ctim.tv_sec), then: dot)
        decimal(Int64(info.st_ctim.tv_nsec), then: nil)
        return String(decoding: key, as: UTF8.self)
    }

    func isFolder(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.appendingPathComponent(path).path, isDirectory: &isDirectory)
            && isDirectory.boolValue
    }

    /// The names in a subfolder, without the writers' temporary files; empty when it does not exist.
    func names(in subfolder: String) throws -> [String] {
        let folder = subfolder.isEmpty ? url : url.appendingPathComponent(subfolder)
        guard FileManager.default.fileExists(atPath: folder.path) else { return [] }
        do {
            return try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { !$0.hasPrefix(".") }
        } catch {
            throw SempereError(.io, "cannot list \(folder.path): \(plainDescription(of: error))")
        }
    }

    func read(_ path: String) throws -> Data {
        let file = url.appendingPathComponent(path)
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw SempereError(.notFound, "\(file.path) is missing or unreadable")
        }
        return data
    }
}
