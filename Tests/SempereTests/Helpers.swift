import Age
import Foundation
import Processes
import Sempere
import Testing

/// Expects `body` to throw a ``SempereError`` with `code`; returns it for further checks.
@discardableResult
func expectSempereError<R>(
    _ code: SempereError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> SempereError? {
    do {
        _ = try body()
        Issue.record("expected SempereError.\(code), but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as SempereError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(!error.reason.isEmpty, sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected SempereError.\(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// A tool's output and exit status.
struct ToolRun {
    let status: Int32
    let stdout: Data
    let stderr: String
}

/// Runs `executable` with `arguments`; a missing executable is an error saying what to install.
func runTool(_ executable: String, _ arguments: [String], install package: String) throws -> ToolRun {
    guard FileManager.default.isExecutableFile(atPath: executable) else {
        throw ToolMissing(description: "\(executable) is missing: run scripts/setup.sh (it installs \(package))")
    }
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return ToolRun(status: process.terminationStatus, stdout: stdout, stderr: String(decoding: stderr, as: UTF8.self))
}

struct ToolMissing: Error, CustomStringConvertible {
    let description: String
}

/// A fresh private temporary directory, removed by the caller.
func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("sempere-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(
        at: url, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    return url
}

/// The note files (authors' and home's re-encrypted copies) in the vault folder `folder` that `identity` opens.
func noteFilesOpened(in folder: URL, by identity: WrapIdentity) throws -> [String] {
    let vault = VaultFolder(url: folder)
    return try (vault.notePaths() + vault.copyPaths()).filter { path in
        (try? Age.decrypt(try Data(contentsOf: folder.appendingPathComponent(path)), identities: [identity.ageIdentity]))
            != nil
    }
}

/// The identity of `epoch` as the device with `keys` could unwrap it from `body` (what a removed device keeps).
func epochIdentity(_ keys: DeviceKeys, epoch: Int, in body: VaultBody) throws -> WrapIdentity {
    let wrap = try #require(body.epochs.first { $0.number == epoch }?.wraps[keys.id])
    return try WrapIdentity(
        string: String(
            decoding: try Age.decrypt(Data(wrap.utf8), identities: [keys.identity.ageIdentity]), as: UTF8.self))
}
