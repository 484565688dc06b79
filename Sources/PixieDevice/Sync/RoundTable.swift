import Foundation
import PixieWire

/// The rounds a device has open (docs/pixie-sync.md, "Rounds"), keyed by this device's half of each round's id,
/// and the rule that routes a round message to one of them: a pure value that ``SyncLoop`` keeps under its lock,
/// and that tests drive by table.
package struct RoundTable<Peer: Sendable>: Sendable {
    package struct Entry: Sendable {
        package var round: ReconcileRound
        package let peer: Peer
        /// The peer's identity (its roster pubkey): a round's messages are taken only from it.
        package let peerKey: Data
        package var lastHeard: Date
    }

    private var entries: [Data: Entry] = [:]

    package init() {}

    /// This device's half of `round`'s id: the key it is kept under.
    package static func key(of round: ReconcileRound) -> Data {
        round.role == .initiator ? round.id.initiator : round.id.responder
    }

    /// Keeps `round` (one not finished), heard from `now`.
    package mutating func keep(_ round: ReconcileRound, peer: Peer, peerKey: Data, now: Date) {
        entries[Self.key(of: round)] = Entry(round: round, peer: peer, peerKey: peerKey, lastHeard: now)
    }

    /// Puts back a round taken out by ``take(_:from:)``, as it is now; a finished round is not kept.
    package mutating func putBack(_ entry: Entry) {
        guard !entry.round.isFinished else { return }
        entries[Self.key(of: entry.round)] = entry
    }

    /// The open round `header` belongs to, taken out of the table; nil if none of this table's rounds is it. As the
    /// responder, the round whose id is the header's; as the initiator, the round this device opened, answered or
    /// not. Only `peerKey`'s own rounds are found.
    package mutating func take(_ header: SyncRoundHeader, from peerKey: Data) -> Entry? {
        for key in [header.round.responder, header.round.initiator] {
            guard let entry = entries[key], entry.peerKey == peerKey else { continue }
            let matches =
                entry.round.role == .responder
                ? key == header.round.responder && entry.round.id == header.round
                : key == header.round.initiator && (entry.round.id.isOpening || entry.round.id == header.round)
            guard matches else { continue }
            entries[key] = nil
            return entry
        }
        return nil
    }

    /// Whether the round kept under `key` is still open.
    package func isOpen(_ key: Data) -> Bool { entries[key] != nil }

    /// Forgets the round kept under `key`.
    package mutating func remove(_ key: Data) { entries[key] = nil }

    /// Gives up every round that has heard nothing for `timeout`; how many.
    package mutating func expire(now: Date, timeout: TimeInterval) -> Int {
        let quiet = entries.filter { now.timeIntervalSince($0.value.lastHeard) >= timeout }.keys
        for key in quiet { entries[key] = nil }
        return quiet.count
    }

}

/// The agreement barrier (docs/pixie-sync.md, "The barrier"), our name and our rule.
package enum AgreementBarrier {
    /// The arrival `seq` through which the tombstones of `category` may be collected: the least of this device's
    /// last agreements with every other device of the roster (`others`), one it never agreed with counting as 0.
    package static func reach(
        _ category: StoreCategory, agreements: [DeviceStore.Agreement], others: [AuthorTag]
    ) -> Int64 {
        others.map { author in
            agreements.first { $0.sibling == author && $0.category == category }?.seq ?? 0
        }.min() ?? 0
    }
}
