import Foundation
import Processes

/// Certificates made at run time by pyca/cryptography (Tests/Reference/tls_certs.py, in the project's venv): a
/// test CA, a server leaf for localhost and 127.0.0.1 (`server`), its renewal (`renewed`: same CA, new key), an expired one (`expired`), and a second CA
/// (`other-ca`) with its own leaf (`other`). No key is committed; each instance makes fresh ones in a directory
/// of its own, removed with it.
public final class TestCertificates: Sendable {
    public let directory: URL
    /// SHA-256 of the server leaf's SubjectPublicKeyInfo (DER): the pin a client would ship.
    public let serverPin: Data

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tls-\(UUID())")
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: try ReferenceOracle.python())
        process.arguments = [
            Vectors.packageRoot.appendingPathComponent("Tests/Reference/tls_certs.py").path, directory.path,
        ]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let printed = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let hex = String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let bytes = stride(from: 0, to: hex.count - 1, by: 2).compactMap { offset -> UInt8? in
            let start = hex.index(hex.startIndex, offsetBy: offset)
            return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)
        }
        guard process.terminationStatus == 0, bytes.count == 32 else {
            throw CertificateError("Tests/Reference/tls_certs.py did not make the certificates: run scripts/setup.sh")
        }
        serverPin = Data(bytes)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// The file `name` (`ca.pem`, `server.pem`, `server.key`, ...).
    public func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    struct CertificateError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
