import Foundation
@_spi(Testing) import PixieDevice
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("BlobCrypto v1: chunked AES-256-GCM, sealed and opened in pieces")
struct BlobCryptoTests {
    static let chunk = BlobCrypto.chunkByteCount

    /// Seals `plaintext` handing the sealer pieces of `pieceSize` bytes.
    func seal(_ plaintext: Data, pieceSize: Int, key: SymmetricKey, nonce: Data) throws -> Data {
        let plaintext = Data(plaintext)
        var sealer = try BlobCrypto.Sealer(key: key, nonce: nonce)
        var blob = Data()
        var offset = 0
        while offset < plaintext.count {
            let end = min(plaintext.count, offset + pieceSize)
            blob += try sealer.update(plaintext[offset..<end])
            offset = end
        }
        blob += try sealer.finalize()
        return blob
    }

    func open(_ blob: Data, pieceSize: Int, key: SymmetricKey, nonce: Data) throws -> Data {
        let blob = Data(blob)  // indices from 0, whatever slice it came from
        var opener = try BlobCrypto.Opener(key: key, nonce: nonce)
        var plaintext = Data()
        var offset = 0
        while offset < blob.count {
            let end = min(blob.count, offset + pieceSize)
            plaintext += try opener.update(blob[offset..<end])
            offset = end
        }
        plaintext += try opener.finalize()
        return plaintext
    }

    /// The nonce of chunk `index` as docs/pixie-protocol.md states it, written here from the text.
    func documentedNonce(_ nonce: Data, index: Int, last: Bool) -> Data {
        var counter = Data(count: 12)
        for byte in 0..<8 { counter[10 - byte] = UInt8((index >> (8 * byte)) & 0xff) }
        counter[11] = last ? 1 : 0
        return Data(zip(nonce, counter).map { $0 ^ $1 })
    }

    @Test(
        "the blob is the documented construction on pyca/cryptography's AESGCM, for 0 to 2.5 chunks",
        arguments: [0, 1000, chunk - 1, chunk, chunk + 1, 2 * chunk, 2 * chunk + chunk / 2])
    func againstTheReference(size: Int) throws {
        let oracle = try ReferenceOracle()
        let key = SymmetricKey(size: .bits256)
        let nonce = SecureRandom.bytes(count: 12)
        let plaintext = SecureRandom.bytes(count: size)
        let blob = try seal(plaintext, pieceSize: 300_001, key: key, nonce: nonce)
        #expect(UInt64(blob.count) == BlobCrypto.sealedByteCount(plaintextByteCount: UInt64(size)))
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("blobcrypto-\(UUID())")
        try plaintext.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let expected = try oracle.call(
            "blobcrypto_v1_seal_file",
            ["key": key.withUnsafeBytes { Data($0) }, "nonce": nonce, "path": file.path, "chunk": Self.chunk])
        #expect(expected["size"] as? Int == blob.count)
        #expect(expected["sha256"] as? String == Data(SHA256.hash(data: blob)).hexString)
        #expect(try open(blob, pieceSize: 77_777, key: key, nonce: nonce) == plaintext)

        // A one-chunk blob is one plain AES-GCM message under the nonce this file reads from the text, so the
        // oracle's reading of it and this one agree.
        if size <= 1000 {
            let single = try oracle.bytes(
                "aead_seal",
                [
                    "cipher": "aes-256-gcm", "key": key.withUnsafeBytes { Data($0) },
                    "nonce": documentedNonce(nonce, index: 0, last: true), "plaintext": plaintext, "aad": Data(),
                ])
            #expect(blob == single)
        }
    }

    @Test("pieces of any size give the same blob, and it opens from pieces of any size")
    func pieceSizes() throws {
        let key = SymmetricKey(size: .bits256)
        let nonce = SecureRandom.bytes(count: 12)
        let plaintext = SecureRandom.bytes(count: 3 * Self.chunk + 5)
        let whole = try seal(plaintext, pieceSize: plaintext.count, key: key, nonce: nonce)
        for size in [1 << 12, Self.chunk, Self.chunk + 1, BlobCrypto.sealedChunkByteCount] {
            #expect(try seal(plaintext, pieceSize: size, key: key, nonce: nonce) == whole)
            #expect(try open(whole, pieceSize: size, key: key, nonce: nonce) == plaintext)
        }
    }

    @Test("two sealers never share a key or a nonce")
    func freshKeys() {
        let first = BlobCrypto.Sealer()
        let second = BlobCrypto.Sealer()
        #expect(first.nonce != second.nonce && first.nonce.count == 12)
        #expect(first.key != second.key && first.key.bitCount == 256)
    }

    func expectTampered(_ blob: Data, key: SymmetricKey, nonce: Data, sourceLocation: SourceLocation = #_sourceLocation)
    {
        do {
            _ = try open(blob, pieceSize: 1 << 16, key: key, nonce: nonce)
            Issue.record("a damaged blob opened", sourceLocation: sourceLocation)
        } catch let error as BackupServiceError {
            guard case .tampered = error else {
                Issue.record("expected tampered, got \(error)", sourceLocation: sourceLocation)
                return
            }
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test("a flipped bit, a cut at a chunk boundary or inside one, a swap, a drop, a repeat, an extension: refused")
    func tampering() throws {
        let key = SymmetricKey(size: .bits256)
        let nonce = SecureRandom.bytes(count: 12)
        let blob = try seal(
            SecureRandom.bytes(count: 2 * Self.chunk + 100), pieceSize: Self.chunk, key: key, nonce: nonce)
        let sealed = BlobCrypto.sealedChunkByteCount
        let chunks = [blob.prefix(sealed), blob.dropFirst(sealed).prefix(sealed), blob.dropFirst(2 * sealed)]
        for index in [0, sealed - 1, sealed + 10, blob.count - 1] {
            var flipped = blob
            flipped[index] ^= 0x20
            expectTampered(flipped, key: key, nonce: nonce)
        }
        // Cut after a whole chunk: what is left ends in a chunk sealed as not last.
        expectTampered(blob.prefix(2 * sealed), key: key, nonce: nonce)
        expectTampered(blob.prefix(sealed), key: key, nonce: nonce)
        expectTampered(blob.prefix(sealed + 7), key: key, nonce: nonce)
        expectTampered(Data(), key: key, nonce: nonce)
        expectTampered(chunks[1] + chunks[0] + chunks[2], key: key, nonce: nonce)
        expectTampered(chunks[0] + chunks[2], key: key, nonce: nonce)
        expectTampered(chunks[0] + chunks[0] + chunks[1] + chunks[2], key: key, nonce: nonce)
        expectTampered(blob + Data([0]), key: key, nonce: nonce)
        expectTampered(blob + Data(count: 16), key: key, nonce: nonce)
        // Another key or nonce opens nothing.
        expectTampered(blob, key: SymmetricKey(size: .bits256), nonce: nonce)
        expectTampered(blob, key: key, nonce: SecureRandom.bytes(count: 12))
        // An empty last chunk after a full one is never written, so never read, even when its tag is right: one
        // plaintext has one blob. A sealer of exactly one chunk writes that chunk as the last.
        let plaintext = SecureRandom.bytes(count: Self.chunk)
        let exact = try seal(plaintext, pieceSize: Self.chunk, key: key, nonce: nonce)
        #expect(exact.count == sealed)
        let notLast = try AES.GCM.seal(
            plaintext, using: key, nonce: try AES.GCM.Nonce(data: documentedNonce(nonce, index: 0, last: false)))
        let emptyLast = try AES.GCM.seal(
            Data(), using: key, nonce: try AES.GCM.Nonce(data: documentedNonce(nonce, index: 1, last: true)))
        expectTampered(notLast.ciphertext + notLast.tag + emptyLast.tag, key: key, nonce: nonce)
    }

    @Test("an opener hands out no plaintext of a chunk before its tag, and none of the last before finalize")
    func holdsBack() throws {
        let key = SymmetricKey(size: .bits256)
        let nonce = SecureRandom.bytes(count: 12)
        let blob = try seal(SecureRandom.bytes(count: Self.chunk + 10), pieceSize: Self.chunk, key: key, nonce: nonce)
        var opener = try BlobCrypto.Opener(key: key, nonce: nonce)
        // The whole first chunk is here, but it could still be the last: nothing yet.
        #expect(try opener.update(blob.prefix(BlobCrypto.sealedChunkByteCount)).isEmpty)
        #expect(try opener.update(blob.dropFirst(BlobCrypto.sealedChunkByteCount).prefix(1)).count == Self.chunk)
        #expect(try opener.update(blob.dropFirst(BlobCrypto.sealedChunkByteCount + 1)).isEmpty)
        #expect(try opener.finalize().count == 10)
    }

    @Test("a key of the wrong size or a nonce of the wrong length is refused with the reason")
    func badParameters() {
        #expect(throws: BackupServiceError.invalid("BlobCrypto takes a 256-bit key and a 12-byte nonce")) {
            _ = try BlobCrypto.Opener(key: SymmetricKey(size: .bits128), nonce: Data(count: 12))
        }
        #expect(throws: BackupServiceError.self) {
            _ = try BlobCrypto.Opener(key: SymmetricKey(size: .bits256), nonce: Data(count: 16))
        }
    }
}
