import Foundation
import PixieWire
import PrivateFiles
import SiblingsCrypto

/// The new device's download pipeline for one offer: it stages the blob in its home by ranges while hashing it,
/// resumes a cut-off download from what is staged (across a restart too: the offer is kept beside it), checks
/// SHA-256 against the offer's before anything is decrypted (the seed's order: the hash came by another road than
/// the bytes), then opens and imports it in one pass and one transaction (BlobCrypto, BackupService.importRawPayload:
/// nothing is kept unless every chunk authenticates), and deletes the blob.
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
    func take(
        _ offer: SyncOffer, events: @Sendable (SyncService.Event) -> Void
    ) async throws -> Result<
        BackupService.ImportSummary, BackupServiceError
    > {
        try makeSyncDirectory()
        let file = stagingFile(offer)
        var hash = SHA256()
        var have: UInt64 = 0
        // What an earlier run fetched is kept, and hashed again (it is on this device's own disk).
        if let reader = try? PrivateFiles.FileReader(file) {
            while true {
                let piece = try BackupService.io { () throws(PrivateFilesError) in try reader.read(upTo: 1 << 20) }
                if piece.isEmpty { break }
                hash.update(data: piece)
                have += UInt64(piece.count)
            }
        }
        guard have <= offer.sizeBytes else {
            try? PrivateFiles.remove(file)
            return .failure(.tampered("the blob is longer than the offer says"))
        }
        let output = try BackupService.io { () throws(PrivateFilesError) in try PrivateFiles.AppendFile(file) }
        while have < offer.sizeBytes {
            events(.downloading(doneBytes: have, totalBytes: offer.sizeBytes))
            let want = Int(min(UInt64(configuration.rangeByteCount), offer.sizeBytes - have))
            let (bytes, size) = try await client.blobRange(offer.blobName, from: have, count: want)
            guard size == offer.sizeBytes, !bytes.isEmpty else {
                output.close()
                try? PrivateFiles.remove(file)
                return .failure(
                    .tampered("blob-svc holds \(size) bytes under this blob, and the offer says \(offer.sizeBytes)"))
            }
            try BackupService.io { () throws(PrivateFilesError) in try output.append(bytes) }
            hash.update(data: bytes)
            have += UInt64(bytes.count)
        }
        output.close()
        events(.downloading(doneBytes: have, totalBytes: offer.sizeBytes))
        // The seed's order: the whole ciphertext's SHA-256, from the sealed offer, before anything is decrypted.
        guard safeCompare(Data(hash.finalize()), offer.sha256) else {
            try? PrivateFiles.remove(file)
            return .failure(
                .tampered(
                    "the snapshot's SHA-256 is not the one in the sibling's sealed offer: blob-svc, or someone "
                        + "between, changed it; nothing was imported"))
        }
        events(.importing)
        let summary: BackupService.ImportSummary
        do {
            let input = try BackupService.io { () throws(PrivateFilesError) in try PrivateFiles.FileReader(file) }
            summary = try BackupService(store: store).importRawPayload { feed in
                var opener = try BlobCrypto.Opener(key: SymmetricKey(data: offer.key), nonce: offer.nonce)
                while true {
                    let piece = try BackupService.read(input, upTo: 1 << 20)
                    if piece.isEmpty { break }
                    try feed(try opener.update(piece))
                }
                try feed(try opener.finalize())
            }
        } catch let error as BackupServiceError {
            try? PrivateFiles.remove(file)
            return .failure(error)
        }
        try? PrivateFiles.remove(file)
        // The receipt: the blob need not wait out its TTL.
        try? await client.deleteBlob(offer.blobName)
        return .success(summary)
    }
}
