import Foundation
import PixieWire

/// A sibling's side of the onboarding sync, as a pure state machine: the requests it is answering, each from
/// the roster check through the export to the offer and its ack, and what to do at every event. No I/O:
/// ``SyncService/respond(to:report:)`` feeds it the frames (already opened and past ``SyncRequestCheck``'s
/// isSameAccount), the roster check's verdict and the export pipeline's end, and carries out the actions.
///
/// What it guarantees:
/// - one export per request_id, ever: a re-send of a request being answered, or answered within twice the
///   freshness window, starts nothing (a request older than that is stale anyway);
/// - a cancel stops the export, or deletes the blob already offered; a cancel that comes before its request
///   (frames are handled each in a task of its own) makes that request start nothing;
/// - an export or upload that fails is said to the new device (a SyncFailure), so "declined" and "broke" differ
///   (the seed's sibling swallowed them, "best-effort");
/// - a blob the new device will not take (a cancel, an ack `ok: false`, an offer that could not be sent) is
///   deleted at once rather than left on blob-svc for a day.
@_spi(Testing) public struct OfferingStateMachine: Sendable {
    public enum Event: Sendable, Equatable {
        /// A SyncRequest from the device whose identity key is `from`, received at `now`.
        case request(SyncRequest, from: Data, now: Date)
        /// The roster check's verdict on a request: allowed, or why not.
        case rosterChecked(requestID: Data, refusal: String?, now: Date)
        case exportEnded(requestID: Data, ExportResult)
        /// The offer went out, or could not (why).
        case offerSent(requestID: Data, error: String?)
        case cancel(requestID: Data, now: Date)
        case ack(SyncAck)
    }

    /// How an export (export, seal, upload) ended.
    public enum ExportResult: Sendable, Equatable {
        /// Uploaded as `blobName`: the offer to send, and what went into it.
        case uploaded(blobName: String, offer: SyncOffer, rows: Int, bytes: UInt64)
        /// Failed; a blob already stored, if any, is to be deleted.
        case failed(SyncFailure.Kind, reason: String, uploadedBlob: String?)
        /// Stopped (a cancel, or the task's own cancellation).
        case stopped(uploadedBlob: String?)
    }

    public enum Action: Sendable, Equatable {
        /// Check that the request's sender and reply key are a device of the logged roster.
        case checkRoster(SyncRequest, from: Data)
        case startExport(SyncRequest)
        case stopExport(requestID: Data)
        case sendOffer(SyncOffer, to: SyncRequest)
        case sendFailure(SyncFailure, to: SyncRequest)
        case deleteBlob(String)
        case report(SyncService.SiblingOutcome)
    }

    enum RequestState: Sendable, Equatable {
        case checking(SyncRequest)
        case exporting(SyncRequest, stopping: Bool)
        case offering(SyncRequest, blob: String, rows: Int, bytes: UInt64)
        case offered(blob: String)
    }

    public let check: SyncRequestCheck
    private(set) var requests: [Data: RequestState] = [:]
    /// Requests claimed, with when: kept twice the freshness window.
    private(set) var answered: [Data: Date] = [:]

    public init(check: SyncRequestCheck) { self.check = check }

    /// Where the request with `requestID` is, as the table tests see it.
    public enum Phase: Sendable, Equatable {
        /// Never seen (or seen and forgotten: refused by the roster check, or pruned).
        case unknown
        case checking
        case exporting
        /// Exporting, and a cancel came: what the export made is deleted.
        case stopping
        case offering
        case offered
        /// Done with, or cancelled before it started: a request with this id starts nothing.
        case answered
    }

    public func phase(of requestID: Data) -> Phase {
        switch requests[requestID] {
        case .checking?: .checking
        case .exporting(_, let stopping)?: stopping ? .stopping : .exporting
        case .offering?: .offering
        case .offered?: .offered
        case nil: answered[requestID] == nil ? .unknown : .answered
        }
    }

    static let unstartedCancel = "a cancel for a request this device has not started; it will start nothing"

    /// Takes `event`, returns what to do, in order.
    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .request(let request, let from, let now):
            let id = request.requestID
            answered = answered.filter { now.timeIntervalSince($0.value) <= 2 * check.freshness }
            // A re-send of a request being answered, or answered already, starts nothing new.
            guard requests[id] == nil, answered[id] == nil else { return [] }
            if let stale = check.check(request, now: now) { return [.report(.dropped(stale))] }
            requests[id] = .checking(request)
            return [.checkRoster(request, from: from)]

        case .rosterChecked(let id, let refusal, let now):
            guard case .checking(let request)? = requests[id] else { return [] }
            if let refusal {
                requests[id] = nil
                return [.report(.dropped(refusal))]
            }
            requests[id] = .exporting(request, stopping: false)
            answered[id] = now
            return [.startExport(request)]

        case .exportEnded(let id, let result):
            guard case .exporting(let request, let stopping)? = requests[id] else {
                if let blob = result.uploadedBlob { return [.deleteBlob(blob)] }
                return []
            }
            switch result {
            case .uploaded(let blob, let offer, let rows, let bytes):
                if stopping {
                    requests[id] = nil
                    return [.deleteBlob(blob)]
                }
                requests[id] = .offering(request, blob: blob, rows: rows, bytes: bytes)
                return [.sendOffer(offer, to: request)]
            case .failed(let kind, let reason, let blob):
                requests[id] = nil
                let failure = SyncFailure(requestID: id, kind: kind, reason: clipped(reason))
                return (blob.map { [.deleteBlob($0)] } ?? [])
                    + (stopping
                        ? []
                        : [
                            .report(.failed(reason)), .sendFailure(failure, to: request),
                        ])
            case .stopped(let blob):
                requests[id] = nil
                return (blob.map { [.deleteBlob($0)] } ?? []) + (stopping ? [] : [.report(.cancelled)])
            }

        case .offerSent(let id, let error):
            guard case .offering(let request, let blob, let rows, let bytes)? = requests[id] else { return [] }
            guard let error else {
                requests[id] = .offered(blob: blob)
                return [.report(.sent(rows: rows, bytes: bytes))]
            }
            // The new device cannot know the blob: it goes now, not in a day. It is told, so that it does not
            // wait out its preparing timeout (the failure may not get through either, but it is tried).
            requests[id] = nil
            let reason = "the offer could not be sent: \(error)"
            return [
                .deleteBlob(blob), .report(.failed(reason)),
                .sendFailure(SyncFailure(requestID: id, kind: .uploadFailed, reason: clipped(reason)), to: request),
            ]

        case .cancel(let id, let now):
            switch requests[id] {
            case .checking?, nil:
                requests[id] = nil
                if answered[id] == nil { answered[id] = now }
                return [.report(.dropped(Self.unstartedCancel))]
            case .exporting(let request, let stopping)?:
                guard !stopping else { return [] }
                requests[id] = .exporting(request, stopping: true)
                return [.stopExport(requestID: id), .report(.cancelled)]
            case .offering(_, let blob, _, _)?, .offered(let blob)?:
                // The new device took another sibling's offer.
                requests[id] = nil
                return [.deleteBlob(blob), .report(.cancelled)]
            }

        case .ack(let ack):
            var actions: [Action] = []
            switch requests[ack.requestID] {
            case .offering(_, let blob, let rows, let bytes)?:
                // The ack overtook the offer's own end: the offer went out.
                requests[ack.requestID] = nil
                actions.append(.report(.sent(rows: rows, bytes: bytes)))
                if !ack.ok { actions.append(.deleteBlob(blob)) }
            case .offered(let blob)?:
                requests[ack.requestID] = nil
                // ok: true: the new device deleted the blob itself. Otherwise it may not have.
                if !ack.ok { actions.append(.deleteBlob(blob)) }
            default:
                break
            }
            return actions + [.report(.acknowledged(ok: ack.ok, reason: ack.reason))]
        }
    }
}

extension OfferingStateMachine.ExportResult {
    var uploadedBlob: String? {
        switch self {
        case .uploaded(let blob, _, _, _): blob
        case .failed(_, _, let blob), .stopped(let blob): blob
        }
    }
}
