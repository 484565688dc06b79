import Foundation
import PrivateFiles
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("PrivateFiles: 0700 directories, atomic 0600 files, and refusals of anything not private")
struct PrivateFilesTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("private-files-\(UUID())")

    @Test("a new directory is 0700, a written file 0600, and a rewrite replaces it whole")
    func createAndWrite() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = root.appendingPathComponent("a/b")
        try PrivateFiles.createDirectory(directory, noun: "the home")
        try PrivateFiles.checkDirectory(directory, noun: "the home", remedy: "")
        var info = stat()
        #expect(lstat(directory.path, &info) == 0 && info.st_mode & 0o777 == 0o700)
        let file = directory.appendingPathComponent("state.json")
        try PrivateFiles.write(Data("one".utf8), to: file)
        try PrivateFiles.write(Data("two".utf8), to: file)
        #expect(try PrivateFiles.read(file, noun: "a state file") == Data("two".utf8))
        #expect(lstat(file.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        // Nothing is left beside it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["state.json"])
        #expect(try PrivateFiles.read(directory.appendingPathComponent("none"), noun: "a state file") == nil)
        try PrivateFiles.remove(file)
        try PrivateFiles.remove(file)
    }

    @Test("an open directory, an open file and a symbolic link are refused, saying how to fix them")
    func refusals() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        try PrivateFiles.createDirectory(root, noun: "the home")
        chmod(root.path, 0o755)
        let open = try #require(throws: PrivateFilesError.self) {
            try PrivateFiles.checkDirectory(root, noun: "the home", remedy: "")
        }
        #expect(open.reason.contains("chmod 700 \(root.path)"))
        chmod(root.path, 0o700)

        let file = root.appendingPathComponent("state.json")
        try PrivateFiles.write(Data("secret".utf8), to: file)
        chmod(file.path, 0o644)
        let readable = try #require(throws: PrivateFilesError.self) {
            try PrivateFiles.read(file, noun: "a state file")
        }
        #expect(readable.reason.contains("chmod 600"))

        let link = root.appendingPathComponent("link.json")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: file)
        let linked = try #require(throws: PrivateFilesError.self) { try PrivateFiles.read(link, noun: "a state file") }
        guard case .insecure = linked else { throw linked }
        let linkedDirectory = root.appendingPathComponent("dir-link")
        try FileManager.default.createSymbolicLink(at: linkedDirectory, withDestinationURL: root)
        #expect(throws: PrivateFilesError.self) {
            try PrivateFiles.checkDirectory(linkedDirectory, noun: "the home", remedy: "")
        }
    }
}
