import Foundation

extension VaultSession {
    /// The vault at a glance (`sempere status`): this device, home, the epoch, the devices, the alerts, and what
    /// the notes are waiting for or set aside as.
    public struct Status: Sendable {
        public let folder: String
        public let vaultID: String
        /// This device, nil when it is no longer listed.
        public let thisDevice: VaultBody.Device?
        public let home: VaultBody.Device?
        public let epoch: Int
        public let devices: [VaultBody.Device]
        public let alerts: [DeviceState.Alert]
        /// Notes shown.
        public let notes: Int
        /// Of ``notes``, those with several current versions (a conflict to resolve).
        public let conflicts: Int
        public let pending: [Pending]
        /// Of ``pending``, those waiting for a file of the vault that has not synced here yet.
        public let waitingForSync: Int
        /// What is set aside, by category, in Repair's order (categories with nothing left out).
        public let setAside: [(category: SetAsideCategory, count: Int)]
        /// When a replacement of the recovery kit takes effect, if one waits (Unix seconds).
        public let kitReplacementAt: Int64?
        /// The epoch of a Re-encrypt Everything home started and has not finished.
        public let reencryptionUnderWay: Int?
        /// What opening and listing the vault noticed.
        public let notices: [String]
    }

    /// The vault's state now, from one listing of its notes.
    public func status() throws -> Status {
        // A removed device has no keys of the vault any more: its status says so, without a listing.
        let listing =
            body.device(keys.id) == nil
            ? Listing(notes: [], pending: [], setAside: [], waitingForRemoval: [], warnings: [])
            : try list(withText: false)
        return Status(
            folder: folder.url.path, vaultID: body.vaultID, thisDevice: body.device(keys.id),
            home: body.device(body.home), epoch: body.currentEpoch.number, devices: body.devices, alerts: alerts,
            notes: Set(listing.notes.map(\.id)).count,
            conflicts: Set(listing.notes.filter { !$0.otherVersions.isEmpty }.map(\.id)).count,
            pending: listing.pending,
            waitingForSync: listing.pending.filter(\.waitingForSync).count,
            setAside: SetAsideCategory.all.compactMap { category in
                let count = listing.setAside.filter { $0.category == category }.count
                return count == 0 ? nil : (category, count)
            },
            kitReplacementAt: body.kitReplacement?.effectiveAt, reencryptionUnderWay: unfinishedReencryption,
            notices: notices + listing.warnings)
    }
}
