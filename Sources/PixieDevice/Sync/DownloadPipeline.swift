import Foundation
import PixieWire
import PrivateFiles
import SiblingsCrypto

/// The new device's download pipeline for one offer: it stages the blob in its home by ranges, and hashes, opens
/// (BlobCrypto) and imports each range (a ``StoreImport`` beside the live store) while the next one downloads. It
/// resumes a cut-off download from what is staged (across a restart too: the offer is kept beside it). Nothing
/// reaches the store unless the whole blob's SHA-256 is the sealed offer's (the hash came by another road than the
/// bytes) and every chunk authenticates; then the import moves into place, and the blob is deleted.
struct DownloadPipeline: Sendable {
    let context: DeviceContext
    let configuration: SyncService.Configuration

    var home: DeviceHome { context.home }
    var store: DeviceStore { context.store }
    var client: PixieClient { context.client }

    var syncDirectory: URL { home.directory.appendingPathComponent("sync") }

    func makeSyncDirectory() throws {
        do {
            try PrivateFiles.createDirectory(syncDirectory, noun: "the device's sync folder")
        } catch {
            throw BackupServiceError.io(error.reason)
        }
    }

    var offerFile: URL { syncDirectory.appendingPathComponent("incoming-offer.json") }

    func stagingFile(_ offer: SyncOffer) -> URL {
        syncDirectory.appendingPathComponent("incoming-\(offer.blobName).blob")
    }

    private struct SavedOffer: Codable {
        var offer: Base64URLBytes
        var subject: Base64URLBytes
        var key: Base64URLBytes
    }

    /// Keeps the offer (its key included: the file is the device's own, mode 0600, in its private home) so that a
    /// restart resumes the download instead of asking again.
    func saveOffer(_ offer: SyncOffer, replyTo subject: RelaySubject, key: XWing.PublicKey) throws {
        try makeSyncDirectory()
        let saved = SavedOffer(
            offer: Base64URLBytes(try offer.encoded), subject: Base64URLBytes(subject.rawRepresentation),
            key: Base64URLBytes(key.rawRepresentation))
        do {
            try PrivateFiles.write(try JSONEncoder().encode(saved), to: offerFile)
        } catch let error as PrivateFilesError {
            throw BackupServiceError.io(error.reason)
        }
    }

    func savedOffer() throws -> (offer: SyncOffer, subject: RelaySubject, key: XWing.PublicKey)? {
        let data: Data?
        do {
            data = try PrivateFiles.read(offerFile, noun: "a kept sync offer")
        } catch {
            throw BackupServiceError.io(error.reason)
        }
        guard let data else { return nil }
        guard let saved = try? JSONDecoder().decode(SavedOffer.self, from: data),
            let offer = try? SyncOffer(decoding: saved.offer.data),
            let subject = try? RelaySubject(rawRepresentation: saved.subject.data),
            let key = try? XWing.PublicKey(rawRepresentation: saved.key.data)
        else {
            // Damaged: ask again rather than resume.
            try? PrivateFiles.remove(offerFile)
            return nil
        }
        return (offer, subject, key)
    }

    /// Downloads, checks and imports the blob of `offer`; a tampered or cut blob is a failure to ack, anything else
    /// (the network, the store) is thrown.
    ///
    /// One pass, overlapped: while the next range is on its way, the one that came is staged, hashed, opened
    /// (BlobCrypto) and its rows written to a ``StoreImport`` beside the live store. Nothing reaches the store
    /// until the whole blob's SHA-256 is the offer's and every chunk has authenticated; then the import is moved
    /// into place. The verdict keeps the seed's order: a blob whose hash is wrong is reported as such, even when a
    /// chunk failed to open first (docs/pixie-device.md, "Differences from the seed").
    func take(
        _ offer: SyncOffer, events: @Sendable (SyncService.Event) -> Void
    ) async throws -> Result<
        BackupService.ImportSummary, BackupServiceError
    > {
        try makeSyncDirectory()
        let file = stagingFile(offer)
        var load = SnapshotLoad(into: try StoreImport(into: store))
        defer { load.discard() }
        var opener = try BlobCrypto.Opener(key: SymmetricKey(data: offer.key), nonce: offer.nonce)
        var hash = SHA256()
        var have: UInt64 = 0
        /// The first chunk or record that did not open; reported once the hash is known to be right.
        var openFailure: BackupServiceError?
        func absorb(_ bytes: Data) throws {
            hash.update(data: bytes)
            have += UInt64(bytes.count)
            guard openFailure == nil else { return }
            do {
                var start = bytes.startIndex
                while start < bytes.endIndex {
                    let end = min(start + (1 << 20), bytes.endIndex)
                    try load.feed(try opener.update(bytes[start..<end]))
                    start = end
                }
            } catch let error as BackupServiceError {
                openFailure = error
            }
        }
        func fail(_ error: BackupServiceError) -> Result<BackupService.ImportSummary, BackupServiceError> {
            try? PrivateFiles.remove(file)
            return .failure(error)
        }
        // What an earlier run fetched is kept, and read again (it is on this device's own disk).
        if let reader = try? PrivateFiles.FileReader(file) {
            while true {
                let piece = try BackupService.io { () throws(PrivateFilesError) in try reader.read(upTo: 1 << 20) }
                if piece.isEmpty { break }
                try absorb(piece)
            }
        }
        guard have <= offer.sizeBytes else { return fail(.tampered("the blob is longer than the offer says")) }
        let output = try BackupService.io { () throws(PrivateFilesError) in try PrivateFiles.AppendFile(file) }
        defer { output.close() }
        let total = offer.sizeBytes
        let rangeByteCount = UInt64(configuration.rangeByteCount)
        var current = try await Self.fetch(offer, at: have, upTo: rangeByteCount, from: client)
        while let (bytes, size) = current {
            events(.downloading(doneBytes: have, totalBytes: total))
            guard size == total, !bytes.isEmpty, UInt64(bytes.count) <= total - have else {
                return fail(.tampered("blob-svc holds \(size) bytes under this blob, and the offer says \(total)"))
            }
            let next = have + UInt64(bytes.count)
            async let upcoming = Self.fetch(offer, at: next, upTo: rangeByteCount, from: client)
            try BackupService.io { () throws(PrivateFilesError) in try output.append(bytes) }
            try absorb(bytes)
            current = try await upcoming
        }
        output.close()
        events(.downloading(doneBytes: have, totalBytes: total))
        // The seed's order: the whole ciphertext's SHA-256, from the sealed offer, decides first.
        guard safeCompare(Data(hash.finalize()), offer.sha256) else {
            return fail(
                .tampered(
                    "the snapshot's SHA-256 is not the one in the sibling's sealed offer: blob-svc, or someone "
                        + "between, changed it; nothing was imported"))
        }
        if let openFailure { return fail(openFailure) }
        events(.importing)
        let summary: BackupService.ImportSummary
        do {
            try load.feed(try opener.finalize())
            summary = try load.commit()
        } catch let error as BackupServiceError {
            return fail(error)
        }
        try? PrivateFiles.remove(file)
        // The receipt: the blob need not wait out its TTL.
        try? await client.deleteBlob(offer.blobName)
        return .success(summary)
    }

    /// The range of `offer`'s blob from `start`, at most `count` bytes, with the size blob-svc says the blob has;
    /// nil past the end.
    private static func fetch(
        _ offer: SyncOffer, at start: UInt64, upTo count: UInt64, from client: PixieClient
    ) async throws -> (bytes: Data, size: UInt64)? {
        guard start < offer.sizeBytes else { return nil }
        return try await client.blobRange(offer.blobName, from: start, count: Int(min(count, offer.sizeBytes - start)))
    }
}
