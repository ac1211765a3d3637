"""Orders produced, and running totals read, with Confluent's Python client
and its schema-registry serializers: the standard client a team's other
services use. Called by formats::confluent_client.

    produce FORMAT BOOTSTRAP REGISTRY TOPIC COUNT   prints the expected
                                                    final total per customer
    read FORMAT BOOTSTRAP REGISTRY TOPIC            prints the count and the
                                                    final total per customer
FORMAT is avro or protobuf. Totals are in cents.
"""
import json
import sys

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

ORDER_AVRO = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "order_id", "type": "long"}, {"name": "customer_id", "type": "long"},
    {"name": "amount", "type": "double"}, {"name": "event_time", "type": "long"}]})
TOTAL_AVRO = json.dumps({"type": "record", "name": "RunningTotal", "namespace": "shop", "fields": [
    {"name": "order_id", "type": "long"}, {"name": "customer_id", "type": "long"},
    {"name": "amount", "type": "double"}, {"name": "total", "type": "double"}]})


def protobuf_classes():
    """Order and RunningTotal, built from a descriptor (as protoc's output would)."""
    file = descriptor_pb2.FileDescriptorProto(name="weir_orders.proto", package="shop", syntax="proto3")
    fields = descriptor_pb2.FieldDescriptorProto
    for name, members in [("Order", [("order_id", fields.TYPE_INT64), ("customer_id", fields.TYPE_INT64),
                                     ("amount", fields.TYPE_DOUBLE), ("event_time", fields.TYPE_INT64)]),
                          ("RunningTotal", [("order_id", fields.TYPE_INT64), ("customer_id", fields.TYPE_INT64),
                                            ("amount", fields.TYPE_DOUBLE), ("total", fields.TYPE_DOUBLE)])]:
        message = file.message_type.add(name=name)
        for number, (field, kind) in enumerate(members, start=1):
            message.field.add(name=field, number=number, type=kind, label=fields.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order")),
            message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.RunningTotal")))


def main():
    mode, fmt, bootstrap, registry_url, topic = sys.argv[1:6]
    registry = SchemaRegistryClient({"url": registry_url})
    order_class, total_class = protobuf_classes()
    context = SerializationContext(topic, MessageField.VALUE)
    if mode == "produce":
        count = int(sys.argv[6])
        if fmt == "avro":
            serialize = AvroSerializer(registry, ORDER_AVRO)
        else:
            serialize = ProtobufSerializer(order_class, registry, {"use.deprecated.format": False})
        producer = Producer({"bootstrap.servers": bootstrap})
        expected = {}
        for order_id in range(1, count + 1):
            customer = order_id % 13 + 1
            cents = (order_id % 50 + 1) * 100 + order_id % 100
            expected[customer] = expected.get(customer, 0) + cents
            order = {"order_id": order_id, "customer_id": customer, "amount": cents / 100,
                     "event_time": 1768471200000 + order_id * 1000}
            value = order if fmt == "avro" else order_class(**order)
            producer.produce(topic, key=str(customer), value=serialize(value, context), partition=0)
        producer.flush()
        print(json.dumps({str(c): t for c, t in sorted(expected.items())}))
        return
    if fmt == "avro":
        deserialize = AvroDeserializer(registry, TOTAL_AVRO)
    else:
        deserialize = ProtobufDeserializer(total_class, {"use.deprecated.format": False})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "weir-formats-reader",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    totals, count = {}, 0
    while True:
        message = consumer.poll(10)
        if message is None:
            sys.exit(f"no end of {topic} within 10 s")
        if message.error():
            if message.error().code() == -191:  # the partition's end
                break
            sys.exit(str(message.error()))
        value = deserialize(message.value(), context)
        if fmt != "avro":
            value = {"customer_id": value.customer_id, "total": value.total}
        totals[value["customer_id"]] = round(value["total"] * 100)
        count += 1
    print(json.dumps({"count": count, "totals": {str(c): t for c, t in sorted(totals.items())}}))


main()
