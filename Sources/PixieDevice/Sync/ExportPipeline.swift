import Foundation
import PixieWire
import SiblingsCrypto
import Synchronization

/// A sibling's export pipeline for one request: it says it is preparing, exports the store with
/// snapshotPayload(includeSecrets: true), seals it with BlobCrypto under a fresh key and nonce, and uploads it as
/// `application/x-pixie-sync` as it goes (nothing waits for the whole store), reporting progress with more
/// SyncPreparing frames. It ends with an ``OfferingStateMachine/ExportResult``; what to do with it (send the offer,
/// a failure, delete the blob) is the state machine's.
struct ExportPipeline: Sendable {
    let context: DeviceContext
    let configuration: SyncService.Configuration
    /// Seals and sends a sync message to the new device.
    let send: @Sendable (SiblingMessage, RelaySubject, XWing.PublicKey) async throws -> Void

    /// Runs the pipeline for `request`. Cancelling the task stops it (``OfferingStateMachine/ExportResult/stopped(uploadedBlob:)``).
    func run(for request: SyncRequest) async -> OfferingStateMachine.ExportResult {
        let (reply, key, id) = (request.replySubject, request.replyPubkey, request.requestID)
        let (client, wallet, bindings, store, clock) =
            (context.client, context.wallet, context.bindings, context.store, context.clock)
        let estimate = BlobCrypto.sealedByteCount(plaintextByteCount: store.byteCount)
        do {
            try await send(.syncPreparing(SyncPreparing(requestID: id, estimatedBytes: estimate)), reply, key)
        } catch {
            return .failed(.exportFailed, reason: "could not answer the request: \(error)", uploadedBlob: nil)
        }
        // Export, seal and upload at once: the sealed pieces go to blob-svc as they are made, at most the pipe's
        // capacity waiting in between, while SyncPreparing reports say how far it is.
        let pipe = PipedBody()
        let stop = StopFlag()
        let uploading = Task {
            // However the upload ends (or never starts: no tokens), a sealer waiting on a full pipe is let go.
            defer { pipe.readerStopped() }
            // Paid with upload-class tokens, not the session, so nothing in the upload names this account; an
            // operator who joins it with the mint a moment before, by time and count, still can
            // (docs/pixie-protocol.md, "What blob-svc can still link"). Enough for half again the estimate, which
            // is the store file's size, bigger than its snapshot but for a store made of a few rows.
            let needed = Int((Double(estimate) * 1.5 / Double(BlobAPI.bytesPerUploadToken)).rounded(.up)) + 1
            let tokens = try await wallet.uploadTokens(
                count: min(needed, TokenWallet.uploadBatchLimit), verifier: UploadKeyListVerifier(bindings: bindings))
            return try await client.uploadBlob(pipe, mime: "application/x-pixie-sync", tokens: tokens)
        }
        let reporting = Task { [send, configuration] in
            var reported: UInt64 = 0
            while !Task.isCancelled {
                try? await clock.sleep(for: configuration.progressInterval)
                guard !Task.isCancelled else { return }
                // The estimate is the store's file size; a snapshot that outgrows it raises it. Nothing moved,
                // nothing sent: a stalled export is not kept alive by its reports (each costs a relay token).
                let done = pipe.byteCount
                guard done > reported else { continue }
                reported = done
                let progress = SyncPreparing(requestID: id, estimatedBytes: max(estimate, done), doneBytes: done)
                try? await send(.syncPreparing(progress), reply, key)
            }
        }
        let sealed: Result<Sealed, any Error> = await withTaskCancellationHandler {
            await Self.onOwnThread { Result { try Self.sealSnapshot(of: store, into: pipe, stop: stop) } }
        } onCancel: {
            stop.set()
            pipe.readerStopped()
        }
        reporting.cancel()
        let upload = await uploading.result
        let uploadedBlob = try? upload.get().blobID
        let snapshot: Sealed
        switch sealed {
        case .success(let done):
            snapshot = done
        case .failure(let error):
            if error is CancellationError || stop.isSet { return .stopped(uploadedBlob: uploadedBlob) }
            if error as? PipedBodyError == .readerGone, case .failure(let failed) = upload {
                return .failed(
                    .uploadFailed, reason: "blob-svc did not take the snapshot: \(failed)", uploadedBlob: nil)
            }
            return .failed(
                .exportFailed, reason: "this device could not export its store: \(error)", uploadedBlob: uploadedBlob)
        }
        let uploaded: BlobAPI.UploadResponse
        switch upload {
        case .success(let answer): uploaded = answer
        case .failure(let error):
            return .failed(.uploadFailed, reason: "blob-svc did not take the snapshot: \(error)", uploadedBlob: nil)
        }
        guard let blobID = Data(base64URLEncoded: uploaded.blobID), blobID.count == SyncOffer.blobIDByteCount,
            uploaded.sizeBytes == Int64(snapshot.size), Data(base64URLEncoded: uploaded.sha256) == snapshot.sha256
        else {
            return .failed(
                .uploadFailed,
                reason: "the blob blob-svc stored is not the snapshot sent (its size or SHA-256 differs: the upload "
                    + "was cut or altered on its way); it was deleted", uploadedBlob: uploaded.blobID)
        }
        if Task.isCancelled { return .stopped(uploadedBlob: uploaded.blobID) }
        let offer = SyncOffer(
            requestID: id, blobID: blobID, key: snapshot.key.withUnsafeBytes { Data($0) }, nonce: snapshot.nonce,
            sha256: snapshot.sha256, sizeBytes: snapshot.size)
        return .uploaded(blobName: uploaded.blobID, offer: offer, rows: snapshot.rows, bytes: snapshot.size)
    }

    /// What a sealed snapshot is: its hash and size as sent, its rows, and the key and nonce it was sealed under.
    struct Sealed: Sendable {
        let sha256: Data
        let size: UInt64
        let rows: Int
        let key: SymmetricKey
        let nonce: Data
    }

    /// Exports `store` with secrets, seals it under a fresh key and nonce, and writes the blob into `pipe` as it
    /// goes, hashing it; the pipe is finished (or failed) when this returns. Blocks: run on a thread of its own.
    static func sealSnapshot(of store: DeviceStore, into pipe: PipedBody, stop: StopFlag) throws -> Sealed {
        var sealer = BlobCrypto.Sealer()
        let key = sealer.key
        let nonce = sealer.nonce
        var hash = SHA256()
        var size: UInt64 = 0
        func write(_ bytes: Data) throws {
            if stop.isSet { throw CancellationError() }
            hash.update(data: bytes)
            size += UInt64(bytes.count)
            try pipe.write(bytes)
        }
        do {
            let summary = try BackupService(store: store).exportRawPayload(includeSecrets: true) { piece in
                try write(try sealer.update(piece))
            }
            try write(try sealer.finalize())
            pipe.finish()
            return Sealed(sha256: Data(hash.finalize()), size: size, rows: summary.rows, key: key, nonce: nonce)
        } catch {
            pipe.fail(error)
            throw error
        }
    }

    /// `body`'s value, computed on a thread of its own rather than on the cooperative pool (it blocks: on
    /// SQLite, on a full pipe).
    static func onOwnThread<Value: Sendable>(_ body: @escaping @Sendable () -> Value) async -> Value {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }
}

/// Set once, read from any thread: how a task's cancellation reaches work on a thread of its own.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .releasing) }
    var isSet: Bool { flag.load(ordering: .acquiring) }
}
