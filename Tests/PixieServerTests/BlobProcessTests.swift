import Foundation
import Processes
import SiblingsCrypto
import SiblingsTestSupport
import Storage
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// blob-svc in the built `pixie-server`, over real sockets: large streams (256 MiB with resume, 2 GiB) in
/// constant memory, and a client that vanishes mid-upload.
@Suite("blob-svc, run as a process", .serialized)
struct BlobProcessTests {
    /// Runs curl and returns its standard output (curl must succeed). It waits on a thread of its own, so the
    /// 2 GiB transfers hold none of the suite's two concurrency threads.
    static func curl(_ arguments: [String], failOnHTTPError: Bool = true) async throws -> String {
        try await onThread { try runCurl(arguments, failOnHTTPError: failOnHTTPError) }
    }

    private static func runCurl(_ arguments: [String], failOnHTTPError: Bool) throws -> String {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["-sS"] + (failOnHTTPError ? ["--fail-with-body"] : []) + arguments
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ProcessTestError(
                "curl \(arguments) failed (\(process.terminationStatus)): \(String(decoding: data, as: UTF8.self))")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// The SHA-256 of a file, read in 1 MiB pieces.
    static func sha256(of url: URL) throws -> Data {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(data: chunk) }
        return Data(hasher.finalize().rawRepresentation)
    }

    /// A process's peak resident set (VmHWM), in bytes.
    static func peakResidentBytes(of pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { throw ProcessTestError("no VmHWM in /proc/\(pid)/status") }
        return kilobytes * 1024
    }

    /// A blob-only `pixie-server` taking anonymous uploads, and a `mebibytes` MiB source file uploaded to it with
    /// curl as `application/x-pixie-sync`: each MiB random, or (`repeating`) one random MiB repeated, which is
    /// cheap to make at any size. Checks the size and SHA-256 the server reports; returns what the test needs.
    static func uploadedBlob(
        mebibytes: Int, repeating: Bool, in directory: URL
    ) async throws -> (server: ServerProcess, url: String, blobID: String, source: URL, sha256: Data) {
        let server = try await ServerProcess(
            dataDirectory: directory.appendingPathComponent("data"),
            extraArguments: ["blob", "--blob-allow-anonymous-uploads", "true"])
        let source = directory.appendingPathComponent("source.bin")
        _ = FileManager.default.createFile(atPath: source.path, contents: nil)
        let writer = try FileHandle(forWritingTo: source)
        let piece = SecureRandom.bytes(count: 1 << 20)
        var hasher = SHA256()
        for _ in 0..<mebibytes {
            let bytes = repeating ? piece : SecureRandom.bytes(count: 1 << 20)
            try writer.write(contentsOf: bytes)
            hasher.update(data: bytes)
        }
        try writer.close()
        let sha256 = Data(hasher.finalize().rawRepresentation)
        let url = server.address.appendingPathComponent("v1/blobs").absoluteString
        let uploaded = try await curl([
            "-X", "POST", "-T", source.path, "-H", "Content-Type: application/x-pixie-sync", "-H", "Expect:", url,
        ])
        let object = Data(uploaded.utf8).jsonObject
        let blobID = try #require(object["blob_id"] as? String)
        #expect(object["size_bytes"] as? Int == mebibytes << 20)
        #expect(object["sha256"] as? String == sha256.base64URLEncodedString())
        return (server, url, blobID, source, sha256)
    }

    @Test func a256MiBBlobStreamsThroughInConstantMemory() async throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url, blobID, _, sha256) = try await Self.uploadedBlob(
            mebibytes: 256, repeating: false, in: directory)

        let target = directory.appendingPathComponent("downloaded.bin")
        _ = try await Self.curl(["-o", target.path, "\(url)/\(blobID)"])
        #expect(try Self.sha256(of: target) == sha256)

        // Resume: the first 100 MiB, then the rest with Range: bytes=N-.
        let head = directory.appendingPathComponent("head.bin")
        let tail = directory.appendingPathComponent("tail.bin")
        _ = try await Self.curl(["-o", head.path, "-r", "0-104857599", "\(url)/\(blobID)"])
        _ = try await Self.curl(["-o", tail.path, "-H", "Range: bytes=104857600-", "\(url)/\(blobID)"])
        let joined = directory.appendingPathComponent("joined.bin")
        _ = FileManager.default.createFile(atPath: joined.path, contents: nil)
        let output = try FileHandle(forWritingTo: joined)
        for part in [head, tail] {
            let input = try FileHandle(forReadingFrom: part)
            while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty { try output.write(contentsOf: chunk) }
            try input.close()
        }
        try output.close()
        #expect(try Self.sha256(of: joined) == sha256)

        let headers = try await Self.curl(["-I", "\(url)/\(blobID)"])
        #expect(headers.contains("Content-Length: \(256 << 20)"))
        #expect(headers.contains("Accept-Ranges: bytes"))
        #expect(headers.contains("ETag: \"\(sha256.base64URLEncodedString())\""))

        let peak = try Self.peakResidentBytes(of: server.processIdentifier)
        #expect(peak < 128 << 20, "pixie-server's peak RSS was \(peak >> 20) MiB for a 256 MiB blob")
        #expect(server.terminate() == 0)
    }

    /// The "memory stays flat while a multi-GiB blob moves", inside the test command: 2 GiB up and down
    /// through the built server. The bytes are one random MiB repeated (nothing on the way compresses), so making
    /// the file costs little; the server's own SHA-256 of what it stored, and ours of what came back, must equal
    /// the source's.
    @Test func a2GiBBlobMovesThroughInConstantMemory() async throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url, blobID, source, sha256) = try await Self.uploadedBlob(
            mebibytes: 2048, repeating: true, in: directory)
        try? FileManager.default.removeItem(at: source)
        let target = directory.appendingPathComponent("downloaded.bin")
        _ = try await Self.curl(["-o", target.path, "\(url)/\(blobID)"])
        #expect(try Self.sha256(of: target) == sha256)
        let peak = try Self.peakResidentBytes(of: server.processIdentifier)
        #expect(peak < 128 << 20, "pixie-server's peak RSS was \(peak >> 20) MiB for a 2 GiB blob")
        #expect(server.terminate() == 0)
    }

    @Test func aClientThatVanishesMidUploadLeavesNothing() async throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let data = directory.appendingPathComponent("data")
        let server = try await ServerProcess(
            dataDirectory: data, extraArguments: ["blob", "--blob-allow-anonymous-uploads", "true"])
        let port = try #require(server.address.port)

        let socket = try #require(RawSocket(port: port))
        let head =
            "POST /v1/blobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-pixie-sync\r\n"
            + "Content-Length: \(64 << 20)\r\n\r\n"
        socket.send(Data(head.utf8) + SecureRandom.bytes(count: 4 << 20))
        let temporary = data.appendingPathComponent("blobs/tmp")
        let partFiles = { (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? [] }
        // The upload is under way: its temporary file exists.
        try await eventually("the upload's temporary file did not appear") { !partFiles().isEmpty }
        #expect(partFiles().count == 1)
        socket.close()
        try await eventually("the vanished client's temporary file was kept") { partFiles().isEmpty }
        let stored = try FileManager.default.contentsOfDirectory(atPath: data.appendingPathComponent("blobs").path)
        #expect(stored == ["tmp"])
        #expect(server.terminate() == 0)
        let store = try SQLiteDatabase(path: data.appendingPathComponent("pixie.sqlite").path)
        #expect(try store.queryOne("SELECT COUNT(*) AS n FROM blobs", [])?.int64("n") == 0)
    }

    @Test func aChunkedBodyPastItsCapIsRefusedOverTheSocketAndLeavesNothing() async throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let data = directory.appendingPathComponent("data")
        let server = try await ServerProcess(
            dataDirectory: data,
            extraArguments: ["blob", "--blob-allow-anonymous-uploads", "true", "--blob-max-bytes", "1048576"])
        let source = directory.appendingPathComponent("source.bin")
        try SecureRandom.bytes(count: (1 << 20) + 1).write(to: source)
        let url = server.address.appendingPathComponent("v1/blobs").absoluteString
        for framing in ["Transfer-Encoding: chunked", "X-Declared: yes"] {
            let status = try await Self.curl(
                [
                    "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-T", source.path, "-H", "Expect:", "-H",
                    framing, "-H", "Content-Type: application/octet-stream", url,
                ], failOnHTTPError: false)
            #expect(status == "413", "\(framing)")
        }
        #expect(server.terminate() == 0)
        let blobs = data.appendingPathComponent("blobs")
        let left = (try? FileManager.default.subpathsOfDirectory(atPath: blobs.path)) ?? []
        #expect(left.filter { $0 != "tmp" }.isEmpty, "\(left)")
        let store = try SQLiteDatabase(path: data.appendingPathComponent("pixie.sqlite").path)
        #expect(try store.queryOne("SELECT COUNT(*) AS n FROM blobs", [])?.int64("n") == 0)
    }

    @Test func manyUploadsAtOnceOverTheSocket() async throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess(
            dataDirectory: directory.appendingPathComponent("data"),
            extraArguments: ["blob", "--blob-allow-anonymous-uploads", "true"])
        let url = server.address.appendingPathComponent("v1/blobs").absoluteString
        let sources = try (0..<12).map { index in
            let source = directory.appendingPathComponent("source-\(index).bin")
            try SecureRandom.bytes(count: (3 << 20) + index).write(to: source)
            return source
        }
        let answers = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for (index, source) in sources.enumerated() {
                group.addTask {
                    let body = try await Self.curl([
                        "-X", "POST", "-T", source.path, "-H", "Expect:", "-H",
                        "Content-Type: application/x-pixie-sync", url,
                    ])
                    return (index, body)
                }
            }
            var answers = [Int: String]()
            for try await (index, body) in group { answers[index] = body }
            return answers.mapValues { Data($0.utf8).jsonObject }
        }
        for (index, source) in sources.enumerated() {
            let object = try #require(answers[index])
            #expect(object["size_bytes"] as? Int == (3 << 20) + index)
            #expect(object["sha256"] as? String == (try Self.sha256(of: source)).base64URLEncodedString())
        }
        #expect(Set(answers.values.compactMap { $0["blob_id"] as? String }).count == sources.count)
        #expect(server.terminate() == 0)
    }
}
