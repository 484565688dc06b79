import Foundation
import SiblingsTestSupport

/// A storage provider between devices, as unreliable as real ones are allowed to be: it carries every
/// file of each device's copy of the vault folder to the others, but holds some back for a while,
/// delivers in any order, delivers some twice, serves old versions it still has, and, when two devices
/// changed the same file, keeps both, the loser as a "conflicted copy" beside it (as Dropbox does). A file a
/// device deletes is deleted on the others (a deletion is a version too, and can be held back like any).
///
/// Deterministic for a seed, so a failing scenario can be replayed.
final class SimulatedProvider {
    struct Version: Equatable {
        /// nil: the file was deleted.
        let bytes: Data?
        let number: Int
    }

    /// The provider's copy: path → every version it has seen, newest last.
    private(set) var cloud: [String: [Version]] = [:]
    private var folders: [String: URL] = [:]
    /// What each device last saw of each path (its base version), to tell a local change from a stale copy.
    private var seen: [String: [String: Int]] = [:]
    private var counter = 0
    private var random: SeededGenerator

    /// Fault rates, 0...1.
    var holdBack = 0.0
    var duplicate = 0.0

    init(seed: UInt64) { random = SeededGenerator(seed: seed) }

    func attach(_ device: String, folder: URL) {
        folders[device] = folder
        seen[device] = [:]
    }

    /// Uploads the device's changes, then delivers the cloud's files to it (with the faults).
    func sync(_ device: String) throws {
        try upload(device)
        try download(device)
    }

    /// Every device, in a random order, `rounds` times: enough for everything to arrive.
    func settle(_ devices: [String], rounds: Int = 3) throws {
        for _ in 0..<rounds {
            for device in devices.shuffled(using: &random) { try sync(device) }
        }
    }

    /// The provider acting in bad faith for a while: puts an older version of `path` back on `device`;
    /// the next syncs deliver the newest again.
    func serveOldVersion(of path: String, to device: String) throws {
        guard let versions = cloud[path], versions.count >= 2, let folder = folders[device],
            let old = versions.dropLast().last(where: { $0.bytes != nil }), let bytes = old.bytes
        else { return }
        try write(bytes, to: folder.appendingPathComponent(path))
        seen[device]![path] = old.number
    }

    /// The provider in bad faith for good: makes an older version of `path` (or, after a deletion, the last
    /// version that existed) its newest, so every device gets it.
    func putBackOldVersion(of path: String) {
        guard let versions = cloud[path], versions.count >= 2,
            let old = versions.dropLast().last(where: { $0.bytes != nil })
        else { return }
        counter += 1
        cloud[path]!.append(Version(bytes: old.bytes, number: counter))
    }

    private func upload(_ device: String) throws {
        let folder = folders[device]!
        let present = Set(try files(in: folder))
        // A file this device had and deleted since: the deletion is the newest version, unless another device
        // changed the file meanwhile (then the change stays, as sync clients keep an edit over a deletion).
        for (path, base) in seen[device]! where !present.contains(path) {
            guard let newest = cloud[path]?.last, newest.number == base, newest.bytes != nil else { continue }
            counter += 1
            cloud[path]!.append(Version(bytes: nil, number: counter))
            seen[device]![path] = counter
        }
        for path in present.sorted() {
            let bytes = try Data(contentsOf: folder.appendingPathComponent(path))
            let versions = cloud[path] ?? []
            // Unchanged on the device since it last synced this path (an old version the provider served
            // stays the version it saw): no change. A device that writes bytes again that an older version
            // had is a change, as a real client uploads any local write.
            if let base = seen[device]![path], versions.first(where: { $0.number == base })?.bytes == Optional(bytes) {
                continue
            }
            if let newest = versions.last, newest.bytes == Optional(bytes) {
                seen[device]![path] = newest.number
                continue
            }
            counter += 1
            if let newest = versions.last, seen[device]![path] != newest.number {
                // Changed here while another device's change reached the provider: keep both.
                cloud[Self.conflictName(path, device: device), default: []].append(
                    Version(bytes: bytes, number: counter))
            } else {
                cloud[path, default: []].append(Version(bytes: bytes, number: counter))
                seen[device]![path] = counter
            }
        }
    }

    /// The provider making a "conflicted copy" of `path` on its own, as sync clients do after a crash.
    func makeConflictCopy(of path: String) {
        guard let newest = cloud[path]?.last, newest.bytes != nil else { return }
        counter += 1
        cloud[Self.conflictName(path, device: "provider"), default: []].append(
            Version(bytes: newest.bytes, number: counter))
    }

    private func download(_ device: String) throws {
        let folder = folders[device]!
        for path in cloud.keys.shuffled(using: &random) {
            guard let newest = cloud[path]?.last, seen[device]![path] != newest.number else { continue }
            if random.next(below: 1_000) < Int(holdBack * 1_000) { continue }  // arrives later
            guard let bytes = newest.bytes else {
                try? FileManager.default.removeItem(at: folder.appendingPathComponent(path))
                seen[device]![path] = newest.number
                continue
            }
            try write(bytes, to: folder.appendingPathComponent(path))
            if random.next(below: 1_000) < Int(duplicate * 1_000) {
                try write(bytes, to: folder.appendingPathComponent(path))
            }
            seen[device]![path] = newest.number
        }
    }

    /// "notes/a/b.age" → "notes/a/b (phone's conflicted copy).age", as Dropbox names them.
    static func conflictName(_ path: String, device: String) -> String {
        guard let dot = path.lastIndex(of: "."), !path[dot...].contains("/") else {
            return "\(path) (\(device)'s conflicted copy)"
        }
        return "\(path[..<dot]) (\(device)'s conflicted copy)\(path[dot...])"
    }

    private func files(in folder: URL) throws -> [String] {
        guard
            let enumerator = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey])
        else { return [] }
        var paths: [String] = []
        for case let url as URL in enumerator {
            guard (try url.resourceValues(forKeys: [.isRegularFileKey])).isRegularFile == true,
                !url.lastPathComponent.hasPrefix(".")
            else { continue }
            paths.append(String(url.standardizedFileURL.path.dropFirst(folder.standardizedFileURL.path.count + 1)))
        }
        return paths.sorted()
    }

    private func write(_ bytes: Data, to url: URL) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try bytes.write(to: url, options: .atomic)
    }
}

extension SeededGenerator {
    /// A choice below `bound`, for the provider's choices.
    mutating func next(below bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
