import Age
import Foundation
import Processes
import SiblingsCrypto
import Testing

/// The payload's batch pipeline (Sources/Age/Pipeline.swift): batches of 1, 2, 4, 8, then 16 chunks, so
/// batch boundaries fall after chunks 1, 3, 7, 15, 31, 47, ... Sizes around them, and damage inside a
/// batch: only the chunks before the damage are released, then the error.
@Suite struct ParallelStreamTests {
    static let chunk = 65536
    static let sealedChunk = 65536 + 16

    /// Byte counts of N chunks and one byte either side, for N at and around the batch boundaries.
    static let sizes = [1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 47, 48].flatMap { chunks in
        [chunks * chunk - 1, chunks * chunk, chunks * chunk + 1]
    }

    /// Decrypts `file`, returning what was released before the outcome.
    static func released(_ file: Data, _ identity: X25519Identity) -> (released: Data, error: AgeError?) {
        var released = Data()
        do {
            try Age.decrypt(file, identities: [identity]) { released.append($0) }
            return (released, nil)
        } catch {
            return (released, error as? AgeError)
        }
    }

    /// Where chunk `index` starts in `file`, which holds `plaintextCount` bytes.
    static func chunkOffset(_ index: Int, in file: Data, plaintextCount: Int) -> Int {
        let chunks = max(1, (plaintextCount + chunk - 1) / chunk)
        return file.count - (plaintextCount + 16 * chunks) + index * sealedChunk
    }

    @Test(arguments: sizes)
    func roundTripAtBatchBoundaries(count: Int) throws {
        let identity = X25519Identity()
        let plaintext = SecureRandom.bytes(count: count)
        let file = try Age.encrypt(plaintext, to: [identity.recipient])
        let chunks = max(1, (count + Self.chunk - 1) / Self.chunk)
        #expect(file.count == 168 + 16 + count + 16 * chunks)
        #expect(try Age.decrypt(file, identities: [identity]) == plaintext)
        // Each release is one chunk, in order.
        var pieces: [Int] = []
        try Age.decrypt(file, identities: [identity]) { pieces.append($0.count) }
        #expect(pieces.count == chunks)
        #expect(pieces.dropLast().allSatisfy { $0 == Self.chunk })
    }

    /// Runs Debian's `age` with `arguments`, where `IN` and `OUT` stand for temporary files holding `input`
    /// and what age writes (the files are too large for Tests/Reference/oracle.py's hex round trip).
    static func age(_ arguments: [String], input: Data, keyFile: Data? = nil) throws -> Data {
        let inURL = try StreamingTests.temporaryFile(input)
        let outURL = try StreamingTests.temporaryFile()
        let keyURL = try StreamingTests.temporaryFile(keyFile ?? Data())
        defer { for url in [inURL, outURL, keyURL] { try? FileManager.default.removeItem(at: url) } }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/age")
        process.arguments =
            arguments.map { ["IN": inURL.path, "OUT": outURL.path, "KEY": keyURL.path][$0] ?? $0 }
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "age \(arguments) failed; is the age package installed?")
        return try Data(contentsOf: outURL)
    }

    /// Through file handles (read(2) straight into the batch buffers) and against age 1.1.1 both ways.
    @Test(arguments: [3 * chunk + 1, 31 * chunk - 1, 31 * chunk + 1, 47 * chunk])
    func fileHandlesAndAgeAcrossBatches(count: Int) throws {
        let identity = X25519Identity()
        let plaintext = SecureRandom.bytes(count: count)
        #expect(try StreamingTests.roundTrip(plaintext, armor: false).plaintext == plaintext)
        let ours = try Age.encrypt(plaintext, to: [identity.recipient])
        let keyFile = Data(AgeKeyFile.encode(identity).utf8)
        #expect(try Self.age(["-d", "-i", "KEY", "-o", "OUT", "IN"], input: ours, keyFile: keyFile) == plaintext)
        let theirs = try Self.age(["-r", identity.recipient.string, "-o", "OUT", "IN"], input: plaintext)
        #expect(try Age.decrypt(theirs, identities: [identity]) == plaintext)
    }

    /// A chunk altered at the start, middle and end of a 16-chunk batch, and the file's last chunk: the
    /// chunks before it are released, nothing after it.
    @Test(arguments: [15, 22, 30, 31, 40])
    func alteredChunkInsideABatch(index: Int) throws {
        let identity = X25519Identity()
        let plaintext = SecureRandom.bytes(count: 40 * Self.chunk + 123)
        var file = try Age.encrypt(plaintext, to: [identity.recipient])
        let offset = Self.chunkOffset(index, in: file, plaintextCount: plaintext.count) + 50
        file[offset] ^= 0x01
        let (released, error) = Self.released(file, identity)
        #expect(error?.code == .payloadFailure)
        #expect(released == plaintext.prefix(index * Self.chunk))

        // The same through file handles: the output holds exactly the chunks before the damage.
        let url = try StreamingTests.temporaryFile(file)
        let outURL = try StreamingTests.temporaryFile()
        defer {
            try? FileManager.default.removeItem(at: url)
            try? FileManager.default.removeItem(at: outURL)
        }
        let input = try FileHandle(forReadingFrom: url)
        let output = try FileHandle(forWritingTo: outURL)
        #expect(throws: AgeError.self) { try Age.decrypt(from: input, to: output, identities: [identity]) }
        try input.close()
        try output.close()
        #expect(try Data(contentsOf: outURL) == plaintext.prefix(index * Self.chunk))
    }

    /// Cut at a chunk boundary inside a batch: the full chunk before the cut verifies as not last and is
    /// released (as age and rage do), then the error.
    @Test func truncatedAtABoundaryInsideABatch() throws {
        let identity = X25519Identity()
        let plaintext = SecureRandom.bytes(count: 40 * Self.chunk + 123)
        let file = try Age.encrypt(plaintext, to: [identity.recipient])
        let cut = Self.chunkOffset(22, in: file, plaintextCount: plaintext.count)
        let (released, error) = Self.released(file.prefix(cut), identity)
        #expect(error?.code == .payloadFailure)
        #expect(released == plaintext.prefix(22 * Self.chunk))
    }

    /// Data after a full last chunk that ends inside a batch: the last chunk is released (it is
    /// authentic as the last), then the error; nothing from what follows.
    @Test(arguments: [1, 100, 2 * 65552])
    func trailingDataInsideABatch(extra: Int) throws {
        let identity = X25519Identity()
        let plaintext = SecureRandom.bytes(count: 22 * Self.chunk)
        let file = try Age.encrypt(plaintext, to: [identity.recipient]) + SecureRandom.bytes(count: extra)
        let (released, error) = Self.released(file, identity)
        #expect(error?.code == .payloadFailure)
        #expect(released == plaintext)
    }
}
